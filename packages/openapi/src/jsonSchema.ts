/** A JSON Schema as the OpenAPI document holds it. */
export type JsonSchema = { [key: string]: unknown }
