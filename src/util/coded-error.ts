/**
 * A refusal that already knows its HTTP status and Matrix errcode. Components
 * throw it (or a subclass named after them) so that they never import an API;
 * the shared HTTP layer (`src/http`) maps it to the Matrix error shape.
 */
export class CodedError extends Error {
  override name = 'CodedError';
  constructor(
    readonly status: number,
    readonly errcode: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}
