/** The spec's canonical JSON examples (appendices §Canonical JSON → Examples; /work/shared/spec-vectors.md §2a), input → output. */
export const SPEC_CANONICAL_EXAMPLES: [input: string, output: string][] = [
  ['{}', '{}'],
  ['{ "one": 1, "two": "Two" }', '{"one":1,"two":"Two"}'],
  ['{\n    "b": "2",\n    "a": "1"\n}', '{"a":"1","b":"2"}'],
  ['{"b":"2","a":"1"}', '{"a":"1","b":"2"}'],
  [
    '{"auth":{"success":true,"mxid":"@john.doe:example.com","profile":{"display_name":"John Doe","three_pids":[{"medium":"email","address":"john.doe@example.org"},{"medium":"msisdn","address":"123456789"}]}}}',
    '{"auth":{"mxid":"@john.doe:example.com","profile":{"display_name":"John Doe","three_pids":[{"address":"john.doe@example.org","medium":"email"},{"address":"123456789","medium":"msisdn"}]},"success":true}}',
  ],
  ['{ "a": "日本語" }', '{"a":"日本語"}'],
  ['{ "本": 2, "日": 1 }', '{"日":1,"本":2}'],
  ['{ "a": "\\u65E5" }', '{"a":"日"}'],
  ['{ "a": null }', '{"a":null}'],
  ['{ "a": -0, "b": 1e10 }', '{"a":0,"b":10000000000}'],
];
