"""Stage 3, the model judge: its spec, prompt and client (`judge`), its calibration against
human labels and the certificate that lets a gate trust it (`calibration`), a person's labels
on calibration items and judged attempts (`labelling`), and the judge and calibration set that
ship with callgate (`bundled`)."""
