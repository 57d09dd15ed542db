"""Python client of the prompt service (standard library only).

    from prompt_service import PromptClient

    prompts = PromptClient("http://localhost:8080", api_key="pk_...")
    print(prompts.invoke(PROMPT_ID, {"name": "Ada"}).rendered_content)
"""

from ._client import Clock, FallbackTemplate, FetchedPrompt, PromptClient, RenderablePrompt, RenderedPrompt
from ._errors import PromptServiceError, code_for_status
from ._transport import RetryInfo, RetryOptions, backoff_delay, parse_retry_after

__all__ = [
    "Clock",
    "FallbackTemplate",
    "FetchedPrompt",
    "PromptClient",
    "PromptServiceError",
    "RenderablePrompt",
    "RenderedPrompt",
    "RetryInfo",
    "RetryOptions",
    "backoff_delay",
    "code_for_status",
    "parse_retry_after",
]

__version__ = "0.1.0"
