import { renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Preloaded (`node --import`) into every service process the chaos suite and the soak start: writes
 * `process.memoryUsage()` to `<THREADLINE_MEMORY_PROBE_DIR>/<pid>.json` once a second, so the
 * harness can report each service's heap as well as the RSS it reads from /proc. Test-only code:
 * services have no metrics endpoint yet (issue 8 item 2).
 */
const dir = process.env.THREADLINE_MEMORY_PROBE_DIR
if (dir) {
  const file = join(dir, `${process.pid}.json`)
  const write = () => {
    try {
      writeFileSync(`${file}.tmp`, JSON.stringify({ at: Date.now(), ...process.memoryUsage() }))
      // Rename so a reader never sees half a file.
      renameSync(`${file}.tmp`, file)
    } catch {
      // The harness's directory may be gone during teardown; nothing to report then.
    }
  }
  write()
  setInterval(write, 1_000).unref()
}
