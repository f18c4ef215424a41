import { currentToken, forgetToken, saveToken } from './api.js'
import { showConversation } from './conversation-view.js'
import { h } from './dom.js'
import { showIndex } from './index-view.js'

/**
 * The viewer's entry (docs/api.md §6): `/threads` lists the followed conversations,
 * `/threads/:conversation_id` shows one. Both need the app's bearer token first.
 */

const main = document.getElementById('main')!

function route(): void {
  const token = currentToken()
  if (!token) return askToken('')
  const match = /^\/threads\/(\d{1,19})\/?$/.exec(location.pathname)
  const refused = () => {
    forgetToken()
    askToken('That token was refused. ')
  }
  if (match) showConversation(main, match[1]!, token, refused)
  else showIndex(main, token, refused)
}

/** Asked once per tab: the token stays in session storage, never in a URL. */
function askToken(why: string): void {
  const input = h('input', {
    type: 'password',
    id: 'token',
    autocomplete: 'off',
    required: '',
    spellcheck: 'false',
  })
  const form = h(
    'form',
    { class: 'token-form' },
    h('h1', {}, 'Bearer token'),
    h(
      'p',
      {},
      `${why}The app's bearer token reads its conversations; it is kept in this tab only.`,
    ),
    h('label', { for: 'token' }, 'Token'),
    input,
    h('button', { type: 'submit' }, 'Open'),
  )
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    const value = input.value.trim()
    if (!value) return
    saveToken(value)
    route()
  })
  main.replaceChildren(form)
  input.focus()
}

route()
