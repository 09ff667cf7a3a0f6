/**
 * Errors of the SDK. Like the Python reference (`ldpsynth.shared.errors`), a validation error names
 * the offending field, its position (row) when there is one, and the legal range, and never carries
 * a private value: its message may end up in a log.
 */

/** Bad input: a field out of its legal range or of the wrong shape. */
export class ValidationError extends Error {
  /** The offending field: an attribute, a schema or card field (`attributes[age].min`, `card.keep_weight`). */
  readonly field: string;
  /** What the field may hold, e.g. `an integer in [1, 5]`. */
  readonly legal: string;
  /** What is wrong, without the value itself (`illegal value`, `missing column`). */
  readonly problem: string;
  /** Row (0-based) where the problem was found, if any. */
  readonly position: number | undefined;

  constructor(field: string, legal: string, problem = "", position?: number) {
    const where = position === undefined ? "" : ` at position ${position}`;
    const what = problem ? `: ${problem}` : "";
    super(`${field}${where}${what}; legal range: ${legal}`);
    this.name = "ValidationError";
    this.field = field;
    this.legal = legal;
    this.problem = problem;
    this.position = position;
  }
}

/** The collection schema itself is malformed. */
export class SchemaError extends ValidationError {
  constructor(field: string, legal: string, problem = "", position?: number) {
    super(field, legal, problem, position);
    this.name = "SchemaError";
  }
}

/** Re-raise a {@link ValidationError} of a schema field as a {@link SchemaError}. */
export function asSchemaError<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    if (err instanceof ValidationError && !(err instanceof SchemaError)) {
      throw new SchemaError(err.field, err.legal, err.problem, err.position);
    }
    throw err;
  }
}
