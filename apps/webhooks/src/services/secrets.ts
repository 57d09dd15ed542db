import type { SecretBox } from '@pm/kit'
import type { WebhookStore } from '../store/types.ts'

/**
 * The start-up migration of signing secrets: a clear one (stored before secrets at rest) or one
 * sealed under a key that SECRETS_KEY has since replaced is sealed again under the current key,
 * bound to its subscription. A secret that opens with no key held stops the start (SecretError):
 * deliveries could not be signed, and the message says which key is missing.
 * Returns how many were re-sealed.
 */
export async function resealSecrets(store: WebhookStore, box: SecretBox): Promise<number> {
  return store.resealSecrets((id, stored) => {
    if (!box.needsReseal(stored)) return null
    return box.seal(box.open(stored, id), id)
  })
}
