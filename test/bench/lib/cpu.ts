import { readdirSync, readFileSync } from 'node:fs'

/**
 * CPU time by process over a measured window, read from Linux's /proc (nothing where /proc is
 * missing): what each part of a multi-process benchmark cost, so a ratio comes with where its time
 * went. Times are in clock ticks (USER_HZ, 100 a second on Linux).
 */
export interface CpuSnapshot {
  /** utime + stime of each live process, by pid, and its minor page faults so far. */
  procs: Map<number, ProcTimes>
  /** The whole machine: busy (user + nice + system + irq + softirq) and idle ticks. */
  busy: number
  idle: number
  system: number
}

const TICK_US = 10_000

interface ProcTimes {
  name: string
  ticks: number
  system: number
  faults: number
}

function readProc(pid: number): ProcTimes | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // comm is in parentheses and may itself hold spaces or parentheses.
    const close = stat.lastIndexOf(')')
    const name = stat.slice(stat.indexOf('(') + 1, close)
    const fields = stat.slice(close + 2).split(' ')
    // Fields 10, 14 and 15 of stat (minflt, utime, stime); fields[0] here is field 3.
    return {
      name,
      ticks: Number(fields[11]) + Number(fields[12]),
      system: Number(fields[12]),
      faults: Number(fields[7]),
    }
  } catch {
    return undefined
  }
}

export function cpuSnapshot(): CpuSnapshot | undefined {
  let pids: number[]
  let total: number[]
  try {
    pids = readdirSync('/proc')
      .filter((f) => /^\d+$/.test(f))
      .map(Number)
    total = readFileSync('/proc/stat', 'utf8')
      .split('\n')[0]!
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number)
  } catch {
    return undefined
  }
  const procs = new Map<number, ProcTimes>()
  for (const pid of pids) {
    const p = readProc(pid)
    if (p) procs.set(pid, p)
  }
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0] = total
  return { procs, busy: user + nice + system + irq + softirq, idle: idle + iowait, system }
}

type Named = ReadonlyArray<readonly [label: string, pid: number | undefined]>

/**
 * What each part spent between two snapshots: each labelled pid, then every other process grouped
 * by its name (postgres, redis-server, …). Several pids may share a label (the Postgres backends of
 * one client): their times add up.
 */
function byPart(
  before: CpuSnapshot,
  after: CpuSnapshot,
  named: Named,
): Map<string, { all: number; system: number; faults: number }> {
  const byPid = new Map<number, string>()
  for (const [label, pid] of named) if (pid !== undefined) byPid.set(pid, label)
  const parts = new Map<string, { all: number; system: number; faults: number }>()
  for (const [pid, p] of after.procs) {
    const was = before.procs.get(pid)
    const d = p.ticks - (was?.ticks ?? 0)
    const faults = p.faults - (was?.faults ?? 0)
    if (d <= 0 && faults <= 0) continue
    const label = byPid.get(pid) ?? p.name
    const t = parts.get(label) ?? { all: 0, system: 0, faults: 0 }
    t.all += Math.max(d, 0)
    t.system += p.system - (was?.system ?? 0)
    t.faults += faults
    parts.set(label, t)
  }
  return parts
}

/**
 * What a window cost per unit of work, by part (see byPart), between two snapshots (both empty
 * where /proc could not be read):
 * - `cpu`: microseconds of CPU, `machine` for all of it; a part's `.sys` entry is the kernel's time
 *   within it, and `busy_share` the machine's busy time over its whole capacity in the window;
 * - `faults`: minor page faults (parts under 0.01 left out), `all` for the processes alive at both
 *   ends. Each is a first touch of memory the process had not used yet (a fresh allocation, a
 *   shared buffer a backend had not mapped). What one costs depends on the machine (dear on a
 *   virtual machine whose kernel cannot map a page without the hypervisor; docs/capacity.md §3);
 *   times that, a part's faults tell how much of its CPU went to growing its memory.
 */
export function costPerUnit(
  before: CpuSnapshot | undefined,
  after: CpuSnapshot | undefined,
  units: number,
  named: Named,
): { cpu: Record<string, number>; faults: Record<string, number> } {
  if (!before || !after || units <= 0) return { cpu: {}, faults: {} }
  const parts = [...byPart(before, after, named)]
  const cpu: Record<string, number> = {}
  const us = (t: number) => Math.round(((t * TICK_US) / units) * 10) / 10
  for (const [label, t] of parts.sort((a, b) => b[1].all - a[1].all)) {
    if (us(t.all) < 1) continue
    cpu[label] = us(t.all)
    // The kernel's share (system calls, page faults), where it is a part worth naming.
    if (us(t.system) >= 1) cpu[`${label}.sys`] = us(t.system)
  }
  const busy = after.busy - before.busy
  cpu.machine = us(busy)
  cpu.machine_system = us(after.system - before.system)
  cpu.busy_share = Math.round((busy / (busy + after.idle - before.idle)) * 100) / 100

  const faults: Record<string, number> = {}
  const per = (n: number) => Math.round((n / units) * 100) / 100
  let all = 0
  for (const [label, t] of parts.sort((a, b) => b[1].faults - a[1].faults)) {
    all += t.faults
    if (per(t.faults) >= 0.01) faults[label] = per(t.faults)
  }
  faults.all = per(all)
  return { cpu, faults }
}

/** A process's peak resident memory (VmHWM) in MB, 0 where /proc cannot tell. */
export function peakRssMb(pid: number | undefined): number {
  if (pid === undefined) return 0
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    return Math.round(Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024)
  } catch {
    return 0
  }
}
