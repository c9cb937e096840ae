"""`callgate serve` and `callgate report --html`: a local web app and JSON API over the store.

A thin layer: `views` reads the store and calls the gate and calibration code (no web imports),
`chart` draws the release chart as inline SVG, `routes` holds the Starlette routes by concern
(each handed the app's `context`), `security` the middlewares and `app` wires them. Only the
`serve` and `report --html` commands import this package, so `callgate --help` stays fast.
"""
