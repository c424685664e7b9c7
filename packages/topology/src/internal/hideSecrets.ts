/**
 * What a config error may show of a value that holds a credential: never the credential.
 *
 * Invariant: a key or field named like a credential (see {@link isSecretName}) has its value
 * replaced by `"***"` (or by its kind, see `show` in `issuesOf.ts`), and a URL's password is written
 * `***` (see {@link hideUrlPasswords}), before any text is cut short: a password half cut off is
 * still half a password. Hiding too much costs a less helpful message; hiding too little puts a
 * secret into a build error and every log of it.
 *
 * @module
 */
import type { TopologyProblem } from '../TopologyError.js'

/**
 * The words that name a credential, compared with each word of a key (`clientSecret`, `api_key`,
 * `x-api-key`, `AUTH_TOKEN`) and with each two neighbouring words joined (`api key`, `private
 * key`). Whole words only: `author`, `passive` and `tokenizer` are shown.
 */
const SECRET_WORD =
  /^(?:pass|passwd|password|passphrase|pwd|secrets?|tokens?|credentials?|auth|authorization|apikey|privatekey|cookies?|jwt)$/

/** Whether a key (or one key of a field path) names a credential: its value is never shown. */
export function isSecretName(key: PropertyKey): boolean {
  if (typeof key !== 'string') return false
  const words = key
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
  return words.some((word, i) => SECRET_WORD.test(word) || SECRET_WORD.test(word + (words[i + 1] ?? '')))
}

/** Whether a field path (`auth.password`, `servers[0]`) names a credential in any of its keys. */
export function isSecretField(field: string): boolean {
  return field.split(/[.[\]"]+/).some(isSecretName)
}

/**
 * A URL's user info: the scheme, the user (up to a `:` or the end of the user info), and the
 * password, up to the last `@` before white space (in a message; see {@link USER_INFO_IN_VALUE})
 * or the next URL (a password may hold a raw `@` or `/`, which `new URL` takes as part of it:
 * `amqp://u:p@ss/w@h` is password `p@ss/w`). A path
 * holding an `@` after a port (`http://h:80/a@b`) is hidden too: better than a password shown.
 * The scheme is taken whole, from the first of a run of scheme characters (a digit first too:
 * `1amqp://u:p@h` hides `p`), so a long run before a `://` is tried once, not from each of its
 * characters (which took time in the square of its length: 11 s for 100,000 letters).
 */
const USER_INFO = /(?<![a-z0-9+.-])([a-z0-9+.-]+:\/\/)([^\s@/?#:]*)(:(?:(?!:\/\/)\S)*)?@/gi

/**
 * {@link USER_INFO} in one value given for an option (not a message): white space is part of the
 * user and the password too, as `new URL` reads `amqp://u:correct horse@h` (password
 * `correct%20horse`). A message's white space ends a URL; a value's is as likely a passphrase's.
 */
const USER_INFO_IN_VALUE = /(?<![a-z0-9+.-])([a-z0-9+.-]+:\/\/)([^@/?#:]*)(:(?:(?!:\/\/)[\s\S])*)?@/gi

/**
 * `text` with the password of every URL in it written `***` (`amqp://user:***@host`). A user
 * without a password is kept, unless it holds an encoded `:` (`guest%3As3cret`, which amqplib reads
 * as user and password): then the whole user info is hidden (`amqp://***@host`).
 */
export function hideUrlPasswords(text: string): string {
  return hideUserInfo(text, USER_INFO)
}

/**
 * {@link hideUrlPasswords} for one value given for an option (a string shown as `got`, a string
 * in an object or array shown as JSON): a password holding white space is hidden whole.
 */
export function hideUrlPasswordsInValue(value: string): string {
  return hideUserInfo(value, USER_INFO_IN_VALUE)
}

function hideUserInfo(text: string, pattern: RegExp): string {
  if (!text.includes('://')) return text
  return text.replace(pattern, (whole, scheme: string, user: string, password: string | undefined) =>
    password !== undefined ? `${scheme}${user}:***@` : /%3a/i.test(user) ? `${scheme}***@` : whole,
  )
}

/**
 * `problem` with a URL's password hidden in its message, `expected` and `got`: whoever wrote them
 * (a component's `validate()`, what one threw), a build error is printed and logged whole.
 */
export function withoutUrlPasswords(problem: TopologyProblem): TopologyProblem {
  const message = hideUrlPasswords(problem.message)
  const expected = problem.expected === undefined ? undefined : hideUrlPasswords(problem.expected)
  const got = problem.got === undefined ? undefined : hideUrlPasswords(problem.got)
  return message === problem.message && expected === problem.expected && got === problem.got
    ? problem
    : {
        ...problem,
        message,
        ...(expected === undefined ? {} : { expected }),
        ...(got === undefined ? {} : { got }),
      }
}
