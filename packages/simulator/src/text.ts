import type { Prng } from './prng.js'

/**
 * Small per-language vocabularies. Only characters of the Basic Multilingual Plane, so that the
 * UTF-16 offsets computed here equal the code point offsets X uses in `entities`.
 */
const VOCABULARY: Record<string, string[]> = {
  en: [
    ...'the a this that thread reply agree disagree really think data open source stream rule post news today why how what when where people every good bad great interesting point fact source link read more here there wait actually never always maybe exactly thanks sure nope yes no lol wow ship deploy bug fix release build test queue worker latency throughput postgres redis index backfill conversation timeline follow'.split(
      ' ',
    ),
  ],
  es: 'el la de que y en un una por con para como pero hilo datos hoy noticias bueno malo gracias claro nunca siempre'.split(
    ' ',
  ),
  fr: 'le la de et un une pour avec mais fil données aujourd hui nouvelles bon mauvais merci jamais toujours peut être'.split(
    ' ',
  ),
  de: 'der die das und ein eine für mit aber faden daten heute nachrichten gut schlecht danke nie immer vielleicht'.split(
    ' ',
  ),
  pt: 'o a de que e em um uma por com para mas fio dados hoje notícias bom ruim obrigado nunca sempre talvez'.split(
    ' ',
  ),
  ja: 'これは スレッド データ 今日 ニュース いい 悪い ありがとう たぶん いつも ですね 本当に そうです'.split(
    ' ',
  ),
}

/** Language mix of generated Posts (weights). */
const LANGS: [string, number][] = [
  ['en', 0.7],
  ['es', 0.08],
  ['ja', 0.08],
  ['pt', 0.06],
  ['fr', 0.04],
  ['de', 0.04],
]

const HASHTAGS = [
  'threadline',
  'opensource',
  'postgres',
  'news',
  'breaking',
  'tech',
  'devops',
  'ai',
  'music',
  'sports',
  'weather',
  'election',
]

const DOMAINS = ['example.com', 'news.example.org', 'blog.example.net', 'docs.example.io']

export function pickLang(prng: Prng): string {
  let r = prng.next()
  for (const [lang, weight] of LANGS) {
    if (r < weight) return lang
    r -= weight
  }
  return 'en'
}

export interface MentionEntity {
  start: number
  end: number
  username: string
  id: string
}
export interface HashtagEntity {
  start: number
  end: number
  tag: string
}
export interface UrlEntity {
  start: number
  end: number
  url: string
  expanded_url: string
  display_url: string
}
export interface Entities {
  mentions?: MentionEntity[]
  hashtags?: HashtagEntity[]
  urls?: UrlEntity[]
}

export interface TextParts {
  /** Users named at the start (replies name whom they answer) and inside the text. */
  mentions: { username: string; id: string }[]
  lang: string
  hashtags: number
  url: boolean
}

/** Builds a Post's text and its `entities`, with offsets that point at the right characters. */
export function buildText(prng: Prng, parts: TextParts): { text: string; entities?: Entities } {
  const words = VOCABULARY[parts.lang] ?? VOCABULARY.en!
  let text = ''
  const mentions: MentionEntity[] = []
  const hashtags: HashtagEntity[] = []
  const urls: UrlEntity[] = []
  for (const m of parts.mentions) {
    const start = text.length
    text += `@${m.username}`
    mentions.push({ start, end: text.length, username: m.username, id: m.id })
    text += ' '
  }
  const count = prng.int(3, 18)
  for (let i = 0; i < count; i++) {
    text += (i === 0 ? '' : ' ') + prng.pick(words)
  }
  for (let i = 0; i < parts.hashtags; i++) {
    const tag = prng.pick(HASHTAGS)
    text += ' '
    const start = text.length
    text += `#${tag}`
    hashtags.push({ start, end: text.length, tag })
  }
  if (parts.url) {
    const path = prng.int(1, 999_999).toString(36)
    const short = `https://t.co/${path}`
    const domain = prng.pick(DOMAINS)
    text += ' '
    const start = text.length
    text += short
    urls.push({
      start,
      end: text.length,
      url: short,
      expanded_url: `https://${domain}/p/${path}`,
      display_url: `${domain}/p/${path}`,
    })
  }
  const entities: Entities = {}
  if (mentions.length > 0) entities.mentions = mentions
  if (hashtags.length > 0) entities.hashtags = hashtags
  if (urls.length > 0) entities.urls = urls
  return mentions.length + hashtags.length + urls.length > 0 ? { text, entities } : { text }
}

const FIRST =
  'Ada Alan Grace Linus Barbara Ken Dennis Margaret Edsger Donald Frances Radia Guido Yukihiro Sophie Tim Katherine Niklaus John Hedy'.split(
    ' ',
  )
const LAST =
  'Lovelace Turing Hopper Torvalds Liskov Thompson Ritchie Hamilton Dijkstra Knuth Allen Perlman Rossum Matsumoto Wilson Berners Johnson Wirth Backus Lamarr'.split(
    ' ',
  )

export function userName(prng: Prng): string {
  return `${prng.pick(FIRST)} ${prng.pick(LAST)}`
}

export function userDescription(prng: Prng): string {
  const words = VOCABULARY.en!
  const n = prng.int(0, 12)
  let text = ''
  for (let i = 0; i < n; i++) text += (i === 0 ? '' : ' ') + prng.pick(words)
  return text
}
