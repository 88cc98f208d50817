import { CodedError } from '../util/coded-error.ts';

/** A request the users component refuses, with the Matrix error code and HTTP status it maps to. */
export class UsersError extends CodedError {
  override name = 'UsersError';
}
