"""The prompt service's Python client: the same behaviour as the TypeScript client."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from ._cache import RefreshPool, TtlCache, stable_key
from ._errors import PromptServiceError
from ._template import DEFAULT_MAX_OUTPUT_BYTES, Renderable, render, sync_variables
from ._transport import RetryInfo, RetryOptions, Route, Transport, default_random, default_sleep

__all__ = ["PromptClient", "RenderedPrompt", "RenderablePrompt", "FetchedPrompt", "FallbackTemplate", "Clock"]

T = TypeVar("T")

_ENVIRONMENTS = ("preview", "production")

_INVOKE = Route("invokePrompt", "POST", "/api/v1/prompts/:id/invoke", retry_safe=True)
_INVOKE_BY_SLUG = Route("invokePromptBySlug", "POST", "/api/v1/prompts/slug/:slug/invoke", retry_safe=True)
_INJECT = Route("injectPrompt", "POST", "/api/v1/prompts/:id/inject", retry_safe=True)
_GET = Route("getPrompt", "GET", "/api/v1/prompts/:id", retry_safe=True)
_RESOLVE = Route("resolvePrompt", "GET", "/api/v1/prompts/:id/resolve", retry_safe=True)
_RESOLVE_BY_SLUG = Route("resolvePromptBySlug", "GET", "/api/v1/prompts/slug/:slug/resolve", retry_safe=True)
_GET_BY_SLUG = Route("getPromptBySlug", "GET", "/api/v1/prompts/slug/:slug", retry_safe=True)
_LIST = Route("listPrompts", "GET", "/api/v1/prompts", retry_safe=True)
_VERSIONS = Route("listVersions", "GET", "/api/v1/prompts/:id/versions", retry_safe=True)
_PUBLISH = Route("publishPrompt", "POST", "/api/v1/prompts/:id/publish", retry_safe=False)
_PROMOTE = Route(
    "promoteVersion", "POST", "/api/v1/prompts/:id/environments/:env/promote", retry_safe=False
)
_LOGIN = Route("login", "POST", "/api/v1/auth/login", retry_safe=False, workspace=False, public=True)


@dataclass(frozen=True)
class FallbackTemplate:
    """A template rendered locally when the service cannot be reached and nothing is cached."""

    template: str
    #: Declared variables (``{"name", "required", "defaultValue"}``); as at the service, a
    #: placeholder not declared is then required. Without them every placeholder is optional.
    variables: Optional[Sequence[Mapping[str, Any]]] = None


@dataclass(frozen=True)
class RenderedPrompt:
    """What ``invoke`` answers: the rendering, and where it came from."""

    rendered_content: str
    variables: Dict[str, Any]
    #: None for a fallback rendered locally for a slug (its id is not known here).
    prompt_id: Optional[str]
    #: None for a fallback rendered locally.
    version_id: Optional[str]
    version: Optional[int]
    #: "network" | "cache" | "stale" | "fallback"
    source: str
    #: The service's whole answer (empty for a fallback).
    data: Dict[str, Any] = field(default_factory=dict)

    @property
    def rendered_messages(self) -> Optional[List[Dict[str, Any]]]:
        """Chat prompts: the rendered ``{role, content}`` messages (None for text prompts)."""
        messages = self.data.get("renderedMessages")
        return list(messages) if isinstance(messages, list) else None

    @property
    def config(self) -> Optional[Dict[str, Any]]:
        """The version's model settings, when it has them."""
        config = self.data.get("config")
        return dict(config) if isinstance(config, dict) else None

    @property
    def references(self) -> Optional[List[Dict[str, Any]]]:
        """When the template has references (``{{> slug}}``): the prompts it included, in order
        of first use, as ``{slug, promptId, versionId, version, via}`` (None otherwise)."""
        refs = self.data.get("references")
        return [dict(r) for r in refs] if isinstance(refs, list) else None


@dataclass(frozen=True)
class RenderablePrompt:
    """A published version fetched for rendering here (``get_renderable``): its content,
    variables and config, and ``render(values)``, which renders it exactly as invoke does."""

    #: The prompt id (for a fallback: the id or slug it was registered under).
    prompt_id: str
    #: None for a fallback template.
    version_id: Optional[str]
    version: Optional[int]
    template: str
    variables: List[Dict[str, Any]]
    #: Chat prompts: the messages (None for text prompts).
    messages: Optional[List[Dict[str, Any]]]
    config: Optional[Dict[str, Any]]
    #: "network" | "cache" | "stale" | "fallback"
    source: str
    _renderable: Renderable = field(repr=False, compare=False)

    @property
    def references(self) -> bool:
        """The version includes other prompts (``{{> slug}}``), which only the service resolves:
        ``render`` refuses it (400 ``REFERENCES_NOT_LOCAL``) and the client's ``render_locally``
        asks invoke instead (cached per variables, as invoke is)."""
        return bool(self._renderable.references)

    def render(self, variables: Optional[Mapping[str, Any]] = None) -> RenderedPrompt:
        """Renders with these values; raises ``PromptServiceError`` as invoke would refuse them
        (400, or 422 ``RENDER_TOO_LARGE`` past the client's ``max_output_bytes``)."""
        values = dict(variables or {})
        out = self._renderable.render(values)
        data: Dict[str, Any] = {**out, "variables": values}
        if self.config is not None:
            data["config"] = self.config
        return RenderedPrompt(
            out["renderedContent"], values, self.prompt_id, self.version_id, self.version, self.source, data
        )


@dataclass(frozen=True)
class FetchedPrompt:
    prompt: Dict[str, Any]
    #: "network" | "cache" | "stale"
    source: str


@dataclass
class Clock:
    """Time and sleeping, replaced in tests. ``now`` is monotonic seconds."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = default_sleep
    random: Callable[[], float] = default_random
    wall_clock: Callable[[], float] = time.time


_UNSET: Any = object()


class PromptClient:
    """A client of the prompt service's gateway. Thread-safe: share one per process.

    Args:
        base_url: the gateway, e.g. ``https://prompts.example.com``.
        api_key: an API key (``pk_...``), for backends and scripts.
        access_token: a user access token (from ``login``), for publish and other operator tasks.
        organization_id: the workspace a user token acts in (API keys have exactly one).
        cache_ttl: seconds a rendering or prompt is served from memory without asking (60).
        stale_while_revalidate: after the TTL, serve the cached value at once and refresh it in
            a background thread (True). When False, an expired entry is fetched again first and
            only served when the service is unavailable.
        max_stale: seconds past the TTL an entry may stand in while the service is down (no limit).
        cache_max_entries: least recently used entries go first (1000).
        fallback_templates: per prompt id (or slug, for ``invoke_by_slug``), a template (or ``FallbackTemplate``) rendered
            locally when the service is unavailable and nothing is cached.
        max_output_bytes: the render service's ``RENDER_MAX_OUTPUT_BYTES`` (1 MiB, its default): a
            local rendering past it is refused with 422 ``RENDER_TOO_LARGE``, as invoke would be.
        retries: a number of retries, or ``RetryOptions`` (3).
        timeout: seconds per attempt, the whole exchange: connecting, redirects, the answer (10).
        on_retry: called before each retry with a ``RetryInfo``.
        on_background_error: a background refresh failed (the stale value keeps being served).
            Background refreshes run on a small pool of threads (4) shared by the client's caches.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: Optional[str] = None,
        access_token: Optional[str] = None,
        organization_id: Optional[str] = None,
        cache_ttl: float = 60.0,
        stale_while_revalidate: bool = True,
        max_stale: Optional[float] = None,
        cache_max_entries: int = 1000,
        fallback_templates: Optional[Mapping[str, Union[str, FallbackTemplate]]] = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        retries: Union[int, RetryOptions] = 3,
        timeout: float = 10.0,
        on_retry: Optional[Callable[[RetryInfo], None]] = None,
        on_background_error: Optional[Callable[[BaseException], None]] = None,
        user_agent: str = "prompt-service-python/0.1.0",
        clock: Optional[Clock] = None,
    ) -> None:
        if not re.match(r"^https?://", base_url):
            raise ValueError("base_url must be an http(s) URL")
        self._lock = threading.Lock()
        self._api_key = api_key
        self._access_token = access_token
        self._organization_id = organization_id
        self._stale_while_revalidate = stale_while_revalidate
        # The service's RENDER_MAX_OUTPUT_BYTES: local renderings past it are refused as invoke's.
        self._max_output_bytes = max_output_bytes
        self._on_background_error = on_background_error
        clock = clock or Clock()
        retry = RetryOptions(retries=retries) if isinstance(retries, int) else retries
        self._transport = Transport(
            base_url,
            credential=self._credential,
            organization_id=lambda: self._organization_id,
            retry=retry,
            timeout=timeout,
            sleep=clock.sleep,
            rand=clock.random,
            wall_clock=clock.wall_clock,
            on_retry=on_retry,
            user_agent=user_agent,
        )
        # One small pool for the background refreshes of all three caches: a burst of stale
        # keys queues there rather than starting a thread per key.
        pool = RefreshPool()
        self._rendered: TtlCache[Dict[str, Any]] = TtlCache(cache_ttl, max_stale, cache_max_entries, clock.now, pool)
        self._prompts: TtlCache[Dict[str, Any]] = TtlCache(cache_ttl, max_stale, cache_max_entries, clock.now, pool)
        # What get_renderable fetched, with its parsed form: (the service's answer, Renderable).
        self._resolved: TtlCache[Tuple[Dict[str, Any], Renderable]] = TtlCache(
            cache_ttl, max_stale, cache_max_entries, clock.now, pool
        )
        self._fallbacks: Dict[str, FallbackTemplate] = {
            key: value if isinstance(value, FallbackTemplate) else FallbackTemplate(value)
            for key, value in (fallback_templates or {}).items()
        }

    # ---- credentials

    def _credential(self) -> Optional[Tuple[str, str]]:
        with self._lock:
            if self._access_token:
                return self._access_token, "user"
            if self._api_key:
                return self._api_key, "apiKey"
            return None

    def set_access_token(self, token: Optional[str], organization_id: Optional[str] = _UNSET) -> None:
        """Use a user token from now on (after login or a refresh)."""
        with self._lock:
            self._access_token = token
            if organization_id is not _UNSET:
                self._organization_id = organization_id

    def login(self, email: str, password: str) -> Dict[str, Any]:
        """Signs in; the token (and the user's first organization) is used for what follows."""
        session: Dict[str, Any] = self._transport.call(_LOGIN, body={"email": email, "password": password})
        self.set_access_token(session["accessToken"], self._organization_id or session.get("organizationId"))
        return session

    # ---- rendering

    def invoke(
        self,
        prompt_id: str,
        variables: Optional[Mapping[str, Any]] = None,
        *,
        version: Optional[int] = None,
        env: Optional[str] = None,
        organization_id: Optional[str] = None,
        cache: bool = True,
        subject: Optional[str] = None,
    ) -> RenderedPrompt:
        """Renders a prompt's published content (or ``version``, or the ``env`` pin).

        Cached by prompt, version or environment and variables; served stale while refreshing;
        rendered from the fallback template when the service cannot be reached and nothing is
        cached. ``subject``: with an ``env`` under a split, the same subject always gets the
        same version (part of the cache key).
        """
        return self._invoke(
            _INVOKE,
            {"id": prompt_id},
            f"{prompt_id}|",
            prompt_id,
            variables,
            version,
            env,
            organization_id,
            cache,
            subject,
        )

    def invoke_by_slug(
        self,
        slug: str,
        variables: Optional[Mapping[str, Any]] = None,
        *,
        version: Optional[int] = None,
        env: Optional[str] = None,
        organization_id: Optional[str] = None,
        cache: bool = True,
        subject: Optional[str] = None,
    ) -> RenderedPrompt:
        """``invoke`` by the prompt's slug (its stable name in the workspace)."""
        return self._invoke(
            _INVOKE_BY_SLUG,
            {"slug": slug},
            _slug_prefix(slug),
            slug,
            variables,
            version,
            env,
            organization_id,
            cache,
            subject,
        )

    def _invoke(
        self,
        route: Route,
        params: Dict[str, str],
        prefix: str,
        name: str,
        variables: Optional[Mapping[str, Any]],
        version: Optional[int],
        env: Optional[str],
        organization_id: Optional[str],
        cache: bool,
        subject: Optional[str] = None,
    ) -> RenderedPrompt:
        if env is not None and env not in _ENVIRONMENTS:
            raise ValueError("env is 'preview' or 'production'")
        values = dict(variables or {})
        org = organization_id or self._organization_id or ""
        key = f"{prefix}invoke|{org}|{version or ''}|{env or ''}|{subject or ''}|{stable_key(values)}"

        def load() -> Dict[str, Any]:
            body: Dict[str, Any] = {"variables": values}
            if version:
                body["version"] = version
            if subject is not None:
                body["subject"] = subject
            answer: Dict[str, Any] = self._transport.call(
                route, params, {"env": env, "organizationId": organization_id}, body
            )
            return answer

        try:
            value, source = self._cached(self._rendered, key, load, cache)
        except PromptServiceError as error:
            fallback = self._fallbacks.get(name)
            if fallback is None or not error.is_unavailable:
                raise
            text, missing = render(fallback.template, _fallback_variables(fallback), values, self._max_output_bytes)
            if missing:
                raise PromptServiceError(
                    400,
                    "MISSING_REQUIRED_VARIABLES",
                    f"missing required variables: {', '.join(missing)}",
                    details=missing,
                    operation=route.operation,
                ) from error
            return RenderedPrompt(text, values, name if route is _INVOKE else None, None, None, "fallback")
        return RenderedPrompt(
            rendered_content=value["renderedContent"],
            variables=value.get("variables", values),
            prompt_id=value.get("promptId", name),
            version_id=value.get("versionId"),
            version=value.get("version"),
            source=source,
            data=value,
        )

    # ---- rendering here, from content fetched once per TTL

    def get_renderable(
        self,
        prompt_id: str,
        *,
        version: Optional[int] = None,
        env: Optional[str] = None,
        organization_id: Optional[str] = None,
    ) -> RenderablePrompt:
        """Fetches what invoke would render (the current version, ``version``, or the ``env`` pin)
        once per TTL, to render it here as often as needed: ``get_renderable(id).render({...})``.

        Served stale while refreshed in a background thread (or while the service is down);
        with nothing cached and the service unavailable, the fallback template registered under
        the id stands in (``source == "fallback"``).
        """
        return self._renderable(_RESOLVE, {"id": prompt_id}, f"{prompt_id}|", prompt_id, version, env, organization_id)

    def get_renderable_by_slug(
        self,
        slug: str,
        *,
        version: Optional[int] = None,
        env: Optional[str] = None,
        organization_id: Optional[str] = None,
    ) -> RenderablePrompt:
        """``get_renderable`` by the prompt's slug (a fallback may be registered under the slug)."""
        return self._renderable(_RESOLVE_BY_SLUG, {"slug": slug}, _slug_prefix(slug), slug, version, env, organization_id)

    def render_locally(
        self,
        prompt_id: str,
        variables: Optional[Mapping[str, Any]] = None,
        *,
        version: Optional[int] = None,
        env: Optional[str] = None,
        organization_id: Optional[str] = None,
    ) -> RenderedPrompt:
        """Like ``invoke``, rendered here: one network call per prompt (and version or env) per
        TTL, whatever the variables."""
        renderable = self.get_renderable(prompt_id, version=version, env=env, organization_id=organization_id)
        if renderable.references:
            # A prompt that includes others renders at the service, which resolves the references.
            return self.invoke(prompt_id, variables, version=version, env=env, organization_id=organization_id)
        return renderable.render(variables)

    def render_locally_by_slug(
        self,
        slug: str,
        variables: Optional[Mapping[str, Any]] = None,
        *,
        version: Optional[int] = None,
        env: Optional[str] = None,
        organization_id: Optional[str] = None,
    ) -> RenderedPrompt:
        """``render_locally`` by the prompt's slug."""
        renderable = self.get_renderable_by_slug(slug, version=version, env=env, organization_id=organization_id)
        if renderable.references:
            return self.invoke_by_slug(slug, variables, version=version, env=env, organization_id=organization_id)
        return renderable.render(variables)

    def _renderable(
        self,
        route: Route,
        params: Dict[str, str],
        prefix: str,
        name: str,
        version: Optional[int],
        env: Optional[str],
        organization_id: Optional[str],
    ) -> RenderablePrompt:
        if env is not None and env not in _ENVIRONMENTS:
            raise ValueError("env is 'preview' or 'production'")
        org = organization_id or self._organization_id or ""
        key = f"{prefix}resolve|{org}|{version or ''}|{env or ''}"

        def load() -> Tuple[Dict[str, Any], Renderable]:
            answer: Dict[str, Any] = self._transport.call(
                route, params, {"version": version, "env": env, "organizationId": organization_id}
            )
            local = Renderable(
                answer["template"], answer["variables"], answer.get("messages"), max_output_bytes=self._max_output_bytes
            )
            return answer, local

        try:
            (value, renderable), source = self._cached(self._resolved, key, load, True)
        except PromptServiceError as error:
            fallback = self._fallbacks.get(name)
            if fallback is None or not error.is_unavailable:
                raise
            declared = _fallback_variables(fallback)
            local = Renderable(fallback.template, declared, max_output_bytes=self._max_output_bytes)
            return RenderablePrompt(name, None, None, fallback.template, declared, None, None, "fallback", local)
        return RenderablePrompt(
            prompt_id=value["promptId"],
            version_id=value["versionId"],
            version=value["version"],
            template=value["template"],
            variables=list(value["variables"]),
            messages=list(value["messages"]) if isinstance(value.get("messages"), list) else None,
            config=dict(value["config"]) if isinstance(value.get("config"), dict) else None,
            source=source,
            _renderable=renderable,
        )

    def inject(self, prompt_id: str, variables: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """Draft preview (never cached: drafts change while you edit)."""
        return self._transport.call(_INJECT, {"id": prompt_id}, None, {"variables": dict(variables or {})})  # type: ignore[no-any-return]

    # ---- prompts and versions

    def get(self, prompt_id: str, *, organization_id: Optional[str] = None, cache: bool = True) -> FetchedPrompt:
        """A prompt with its draft, cached like ``invoke``."""
        return self._get(_GET, {"id": prompt_id}, f"{prompt_id}|", organization_id, cache)

    def get_by_slug(self, slug: str, *, organization_id: Optional[str] = None, cache: bool = True) -> FetchedPrompt:
        """``get`` by the prompt's slug."""
        return self._get(_GET_BY_SLUG, {"slug": slug}, _slug_prefix(slug), organization_id, cache)

    def _get(
        self, route: Route, params: Dict[str, str], prefix: str, organization_id: Optional[str], cache: bool
    ) -> FetchedPrompt:
        org = organization_id or self._organization_id or ""

        def load() -> Dict[str, Any]:
            answer: Dict[str, Any] = self._transport.call(route, params, {"organizationId": organization_id})
            return answer

        value, source = self._cached(self._prompts, f"{prefix}prompt|{org}", load, cache)
        return FetchedPrompt(value, source)

    def list(
        self,
        *,
        search: Optional[str] = None,
        tags: Optional[Union[str, Sequence[str]]] = None,
        visibility: Optional[str] = None,
        page: Optional[int] = None,
        limit: Optional[int] = None,
    ) -> Dict[str, Any]:
        """A page of the workspace's prompts: ``{"prompts", "pagination", "summary"}``."""
        query = {
            "search": search,
            "tags": tags if tags is None or isinstance(tags, str) else ",".join(tags),
            "visibility": visibility,
            "page": page,
            "limit": limit,
        }
        return self._transport.call(_LIST, None, query)  # type: ignore[no-any-return]

    def versions(self, prompt_id: str) -> List[Dict[str, Any]]:
        """The prompt's published versions, newest first."""
        answer = self._transport.call(_VERSIONS, {"id": prompt_id})
        return list(answer["versions"])

    def publish(self, prompt_id: str, change_log: Optional[str] = None) -> Dict[str, Any]:
        """The draft becomes the next version (needs a user token: ``login`` or ``access_token``)."""
        body = {"changeLog": change_log} if change_log else {}
        version: Dict[str, Any] = self._transport.call(_PUBLISH, {"id": prompt_id}, None, body)
        self._written(prompt_id)
        return version

    def promote(
        self,
        prompt_id: str,
        env: str,
        *,
        version: Optional[int] = None,
        version_id: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Pins a published version (by number or id) to ``preview`` or ``production``."""
        if env not in _ENVIRONMENTS:
            raise ValueError("env is 'preview' or 'production'")
        if (version is None) == (version_id is None):
            raise ValueError("give one of version or version_id")
        if version is not None:
            found = [v for v in self.versions(prompt_id) if v.get("version") == version]
            if not found:
                raise PromptServiceError(
                    404,
                    "NOT_FOUND",
                    f"prompt {prompt_id} has no version {version}",
                    operation=_PROMOTE.operation,
                )
            version_id = found[0]["_id"]
        pin: Dict[str, Any] = self._transport.call(
            _PROMOTE, {"id": prompt_id, "env": env}, None, {"versionId": version_id}
        )
        self._written(prompt_id)
        return pin

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, Any]] = None,
        body: Any = None,
    ) -> Any:
        """Any other route of the service, e.g. ``request("POST", "/api/v1/prompts", body={...})``.

        Answers the payload (the ``{"data"}`` envelope removed). Retried on 429; on 5xx and
        network errors only for GET.
        """
        method = method.upper()
        route = Route(f"{method} {path}", method, path, retry_safe=method == "GET")
        return self._transport.call(route, None, query, body)

    # ---- the cache

    def invalidate(self, prompt_id: Optional[str] = None, *, slug: Optional[str] = None) -> None:
        """Drops what is cached of one prompt (by id, or by slug), or of all of them."""
        prefix = f"{prompt_id}|" if prompt_id else _slug_prefix(slug) if slug else ""
        self._rendered.clear(prefix)
        self._prompts.clear(prefix)
        self._resolved.clear(prefix)

    def settled(self, timeout: Optional[float] = None) -> None:
        """Waits for the background refreshes running now."""
        self._rendered.settled(timeout)
        self._prompts.settled(timeout)
        self._resolved.settled(timeout)

    def _written(self, prompt_id: str) -> None:
        # A write through this client drops what it holds of that prompt, and the entries
        # cached by slug (which slug is this prompt's is not known here).
        self.invalidate(prompt_id)
        self._rendered.clear("slug:")
        self._prompts.clear("slug:")
        self._resolved.clear("slug:")

    def _cached(
        self,
        cache: TtlCache[T],
        key: str,
        load: Callable[[], T],
        use_cache: bool,
    ) -> Tuple[T, str]:
        if not use_cache:
            return load(), "network"
        state, value = cache.lookup(key)
        if state == "fresh" and value is not None:
            return value, "cache"

        failure: List[BaseException] = []

        def refresh() -> None:
            try:
                cache.set(key, load())
            except PromptServiceError as error:
                # An authoritative answer (the prompt is gone, the key revoked) ends the entry;
                # unavailability keeps it, so the stale value carries on standing in.
                if not error.is_unavailable:
                    cache.delete(key)
                failure.append(error)
                if self._stale_while_revalidate and self._on_background_error:
                    self._on_background_error(error)
            except BaseException as error:  # noqa: BLE001 - reported, never lost in a thread
                failure.append(error)
                if self._stale_while_revalidate and self._on_background_error:
                    self._on_background_error(error)

        if state == "stale" and value is not None:
            if self._stale_while_revalidate:
                cache.revalidate(key, refresh)
                return value, "stale"
            cache.revalidate(key, refresh, wait=True).join()
            if failure:
                error = failure[0]
                if isinstance(error, PromptServiceError) and error.is_unavailable:
                    return value, "stale"
                raise error
            again_state, again = cache.lookup(key)
            if again_state != "miss" and again is not None:
                return again, "network"
        loaded = load()
        cache.set(key, loaded)
        return loaded, "network"


def _fallback_variables(fallback: FallbackTemplate) -> List[Dict[str, Any]]:
    """A fallback's variables as the service would hold them (syncVariables: an undeclared
    placeholder is required); without declared variables every placeholder is optional."""
    synced = sync_variables(fallback.template, fallback.variables or [])
    if fallback.variables is None:
        return [{**v, "required": False} for v in synced]
    return synced


def _slug_prefix(slug: str) -> str:
    return f"slug:{slug}|"
