"""Stage 3, the model judge: its spec, prompt and client (`judge`), its calibration against
human labels and the certificate that lets a gate trust it (`calibration`), the judge as a run
uses it: one step, its cache and its concurrent loop (`step`), a person's labels
on calibration items and judged attempts (`labelling`), and the judge and calibration set that
ship with callgate (`bundled`)."""
