/** Lower-cased, Unicode-aware word tokens of a text (placeholder; see searchTerms). */
export function tokenize(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}\p{M}]+/gu) ?? []
}
