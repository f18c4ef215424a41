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
  ['::', 96],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001::', 32],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  blocked.addSubnet(net, bits, 'ipv6')
}

/** The eight 16-bit words of an IPv6 address (`isIP` already said it is one), `::` expanded. */
function ipv6Words(address: string): number[] {
  let text = address.toLowerCase()
  const quad = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text)
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number]
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head = '', tail] = text.split('::')
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((w) => parseInt(w, 16)))
  const left = parse(head)
  const right = tail === undefined ? [] : parse(tail)
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right]
}

const ipv4Of = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`

/**
 * The IPv4 address an IPv6 address stands for, where it embeds one that a host may route to as
 * IPv4: mapped (`::ffff:0:0/96`) and translated (`::ffff:0:0:0/96`). The other embedding forms
 * (compatible `::/96`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`, Teredo `2001::/32`) are refused
 * whole.
 */
function embeddedIpv4(w: readonly number[]): string | undefined {
  const zeros = (n: number) => w.slice(0, n).every((x) => x === 0)
  if (zeros(5) && w[5] === 0xffff) return ipv4Of(w[6]!, w[7]!)
  if (zeros(4) && w[4] === 0xffff && w[5] === 0) return ipv4Of(w[6]!, w[7]!)
  return undefined
}

const REFUSED = 'is a loopback, private, link-local or reserved address'

/** Why an address is refused, or undefined when a webhook may reach it. */
export function forbiddenAddressReason(address: string): string | undefined {
  const family = isIP(address)
  if (family === 0) return `"${address}" is not an IP address`
  if (family === 6) {
    const words = ipv6Words(address)
    const v4 = embeddedIpv4(words)
    if (v4) return forbiddenAddressReason(v4) && `${address} ${REFUSED}`
    if (words.slice(0, 6).every((x) => x === 0)) return `${address} ${REFUSED}`
  }
  return blocked.check(address, family === 4 ? 'ipv4' : 'ipv6')
    ? `${address} ${REFUSED}`
    : undefined
}
