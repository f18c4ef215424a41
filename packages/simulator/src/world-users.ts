import type { WireUser } from '@threadline/domain'
import type { Prng } from './prng.js'
import { userDescription, userName } from './text.js'
import { snowflake } from './world-ids.js'

const DAY_MS = 86_400_000

export interface SimUser {
  id: string
  username: string
  wire: WireUser
  /** The user with every field, serialised once: users never change after creation. */
  json: string
}

/** Users created between 2011 and a year before `startMs`, snowflake ids of their creation time. */
export function createUsers(prng: Prng, count: number, startMs: number): SimUser[] {
  const users: SimUser[] = []
  const usernames = new Set<string>()
  for (let i = 0; i < count; i++) users.push(createUser(prng, i, startMs, usernames))
  return users
}

/** The `i`th user; its username is unique among `usernames`, which it joins. */
function createUser(prng: Prng, i: number, startMs: number, usernames: Set<string>): SimUser {
  const createdMs = prng.int(1_300_000_000_000, startMs - 365 * DAY_MS)
  const id = snowflake(createdMs, BigInt(prng.int(0, 1023)), i % 4096)
  const name = userName(prng)
  let username = name
    .toLowerCase()
    .replace(/[^a-z]/g, '_')
    .slice(0, 10)
  while (usernames.has(username)) username = `${username.slice(0, 10)}${prng.int(0, 99999)}`
  usernames.add(username)
  const followers = prng.pareto(1.1, 20)
  const verified = prng.chance(0.03)
  const wire: WireUser = {
    id,
    name,
    username,
    created_at: new Date(createdMs).toISOString(),
    description: userDescription(prng),
    location: prng.chance(0.4) ? prng.pick(['Lisbon', 'Tokyo', 'Berlin', 'Lagos', 'Lima']) : '',
    url: '',
    profile_image_url: `https://pbs.example.com/profile_images/${id}/normal.jpg`,
    protected: false,
    verified,
    verified_type: verified ? 'blue' : 'none',
    public_metrics: {
      followers_count: followers,
      following_count: prng.pareto(1.5, 30),
      tweet_count: prng.pareto(1.2, 50),
      listed_count: Math.floor(followers / 100),
      like_count: prng.pareto(1.2, 100),
    },
  }
  return { id, username, wire, json: JSON.stringify(wire) }
}
