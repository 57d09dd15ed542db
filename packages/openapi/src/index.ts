export {
  buildOpenApiDocument,
  type DocumentOptions,
  type HttpVerb,
  type JsonSchema,
  type OpenApiDocument,
  type OpenApiOperation,
  type OpenApiResponse,
  toOpenApiPath,
} from './document.ts'
