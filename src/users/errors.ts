/** A request the users component refuses, with the Matrix error code and HTTP status it maps to. */
export class UsersError extends Error {
  override name = 'UsersError';
  constructor(
    readonly status: number,
    readonly errcode: string,
    message: string,
  ) {
    super(message);
  }
}
