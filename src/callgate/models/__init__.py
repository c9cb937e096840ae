"""Calling a model: the candidate's configuration (`config`), where its requests go (`routes`),
the two clients (`lean`, `litellm_client`) behind one interface (`providers`), what a request
comes back as (`replies`), what a reply cost (`pricing`), the lines recorded for each attempt
(`recorded_lines`) and the retry policy (`retry`). Used by live runs and by the judge."""
