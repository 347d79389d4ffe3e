"""Documentation kept in sync on a schedule: the folders and help centers of
`knowledge.sources`, mirrored by `supportbot serve` every `every_hours` (`scheduler`), one
replica at a time through a lease in the database (`runs`). What one sync does is
`knowledge.mirror`; this package decides when, and where, and records how it went."""
