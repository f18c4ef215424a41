import { BlockList, isIP } from 'node:net'

/**
 * Addresses a webhook must never reach (docs/api.md §4.3): loopback, private, link-local (which holds
 * the cloud metadata address 169.254.169.254), carrier-grade NAT (Alibaba's metadata), unspecified,
 * multicast, reserved and documentation ranges, and the IPv6 equivalents.
 */
const blocked = new BlockList()
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blocked.addSubnet(net, bits, 'ipv4')
}
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  blocked.addSubnet(net, bits, 'ipv6')
}

/** The IPv4 address inside an IPv4-mapped or -compatible IPv6 address (`::ffff:10.0.0.1`). */
function embeddedIpv4(address: string): string | undefined {
  const m = /^::(?:ffff(?::0{1,4})?:)?(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address)
  if (m) return m[1]
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address)
  if (!hex) return undefined
  const hi = parseInt(hex[1]!, 16)
  const lo = parseInt(hex[2]!, 16)
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`
}

/** Why an address is refused, or undefined when a webhook may reach it. */
export function forbiddenAddressReason(address: string): string | undefined {
  const family = isIP(address)
  if (family === 0) return `"${address}" is not an IP address`
  if (family === 6) {
    const v4 = embeddedIpv4(address)
    if (v4) return forbiddenAddressReason(v4)
  }
  return blocked.check(address, family === 4 ? 'ipv4' : 'ipv6')
    ? `${address} is a loopback, private, link-local or reserved address`
    : undefined
}
