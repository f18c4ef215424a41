/** The compliance streams' partitions, as X numbers them. */
export const COMPLIANCE_PARTITIONS = 4

/**
 * The partition (1–4) of a compliance event (docs/api.md §8.2): FNV-1a (32 bits) of the decimal
 * id of its target (the Post for Post events, the user for user events), modulo 4, plus 1. A hash
 * rather than the id itself: the low bits of a snowflake id are a per-millisecond sequence, mostly
 * 0, which would put most events in one partition.
 */
export function compliancePartition(id: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < id.length; i++) {
    h ^= id.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return (h % COMPLIANCE_PARTITIONS) + 1
}
