#!/bin/sh
# The image's entrypoint, on PATH as `threadline`: a role name runs that service's compiled main
# (services/<role>/dist/main.js); anything else is a command of the threadline CLI.
set -e
case "${1:-}" in
  '' | *[!a-z-]*) ;;
  *)
    if [ -f "/app/services/$1/dist/main.js" ]; then
      main="/app/services/$1/dist/main.js"
      shift
      exec node "$main" "$@"
    fi
    ;;
esac
exec node /app/packages/cli/dist/main.js "$@"
