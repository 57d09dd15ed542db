// The SSRF guard moved to @pm/kit (the runs service checks provider base URLs with it too).
export {
  type CheckedTarget,
  type CheckTargetOptions,
  checkTargetUrl,
  type HostLookup,
  isPublicAddress,
  pinnedDispatcher,
  type ResolvedAddress,
  SsrfError,
  type SsrfReason,
} from '@pm/kit'
