/**
 * The JSON text of a wire object (a Post's or a user's `raw`), made once per object: the writer
 * sends each stored Post to Postgres and then to the `stored` stream, and serializing a 2 KB
 * Post twice was a measurable part of its work. Keyed by identity (a WeakMap): the text lives as
 * long as the object does, and an object must not be changed after its text was taken.
 */
const texts = new WeakMap<object, string>()

export function wireJson(value: object): string {
  let text = texts.get(value)
  if (text === undefined) {
    text = JSON.stringify(value)
    texts.set(value, text)
  }
  return text
}
