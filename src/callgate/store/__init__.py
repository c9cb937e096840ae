"""The one owner of SQL: the SQLite store's schema, migrations and queries (`db`).

Every other package reads and writes runs, attempts, verdicts, gates and calibrations through
`Store`."""
