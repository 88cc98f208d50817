import { invalidParam, type MatrixError } from './matrix-error.ts';

export interface IntegerQueryOptions {
  /** The value when the parameter is absent (or empty, unless `emptyIsInvalid`). */
  fallback: number;
  /** Larger values are cut down to this. */
  max?: number;
  /**
   * Smaller values are refused, and the refusal names this minimum. Without it, only digits are
   * taken (a non-negative integer).
   */
  min?: number;
  /** An empty value is refused rather than taken as absent. */
  emptyIsInvalid?: boolean;
  /** The error a bad value gets: 400 `M_INVALID_PARAM` unless given. */
  refuse?: (message: string) => MatrixError;
}

/**
 * Parses an integer query parameter, `name=raw`: the fallback when it is absent, the value
 * (at most `max`) when it is an integer in range, and a 400 naming the parameter otherwise.
 */
export function integerQuery(name: string, raw: string | undefined, options: IntegerQueryOptions): number {
  if (raw === undefined || (raw === '' && !options.emptyIsInvalid)) return options.fallback;
  const { min } = options;
  const valid = min === undefined ? /^\d+$/.test(raw) : /^-?\d+$/.test(raw) && Number(raw) >= min;
  if (!valid) {
    throw (options.refuse ?? invalidParam)(min === undefined ? `${name} must be a non-negative integer` : `${name} must be an integer of at least ${min}`);
  }
  return Math.min(Number(raw), options.max ?? Number.MAX_SAFE_INTEGER);
}
