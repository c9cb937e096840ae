"""The one owner of SQL: the SQLite store. `db.Store` is the class every stage reads and writes
through; `schema` holds the tables and the named migrations, `opening` the checks made before a
file is used, and `judging` and `serving` the Store methods for the judge and for the web app.
"""
