#!/bin/sh
# Run by the image's entrypoint on a new cluster, while its first-start server is up: the stanza
# exists before the first WAL segment is archived (initdb's own shutdown archives one), so no
# archive_command ever fails for want of it. The backup service creates it on older volumes.
set -e
pgbackrest stanza-create
