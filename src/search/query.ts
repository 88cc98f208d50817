/**
 * A client's `search_term` turned into an FTS4 MATCH expression (enhanced query syntax,
 * which sql.js's build has: ENABLE_FTS3_PARENTHESIS). What a client may write:
 * - words: each matches as a prefix (`mart` finds "martians"), all must match;
 * - `"a quoted phrase"`: those words in that order;
 * - `-word` or `-"phrase"`: leaves out events that have it;
 * - `OR` (upper case) between two terms: either may match.
 * Nothing the client writes reaches FTS as syntax: every word is re-quoted from the
 * letters and digits it holds, so `NEAR`, `*`, `:` and quotes cannot break a query.
 */

/** The fields clients may search (client-server §Server side search: `keys`), as the index's columns. */
export const SEARCH_KEYS = { 'content.body': 'body', 'content.name': 'name', 'content.topic': 'topic' } as const;
export type SearchKey = keyof typeof SEARCH_KEYS;
export const ALL_KEYS = Object.keys(SEARCH_KEYS) as SearchKey[];

/** Words as the unicode61 tokenizer sees them: runs of letters, digits and combining marks. */
const WORD = /[\p{L}\p{N}\p{M}]+/gu;

export interface ParsedQuery {
  /** The MATCH expression; undefined when the term holds nothing to search for. */
  match: string | undefined;
  /** The words asked for (not the excluded ones), lower-cased: the start of `highlights`. */
  words: string[];
}

interface Term {
  words: string[];
  /** A quoted phrase matches exactly; a bare word as a prefix. */
  phrase: boolean;
  negated: boolean;
  /** Joined to the term before it by OR. */
  or: boolean;
}

function words(text: string): string[] {
  return text.match(WORD) ?? [];
}

function lex(term: string): Term[] {
  const out: Term[] = [];
  const pattern = /(-?)"([^"]*)"?|(\S+)/gu;
  let pendingOr = false;
  for (const match of term.matchAll(pattern)) {
    if (match[3] === 'OR') {
      pendingOr = out.length > 0;
      continue;
    }
    const negated = match[1] === '-' || (match[3]?.startsWith('-') ?? false);
    const found = match[2] !== undefined ? words(match[2]) : words(match[3]!);
    if (found.length === 0) continue;
    if (match[2] !== undefined) {
      out.push({ words: found, phrase: true, negated, or: pendingOr && !negated });
    } else {
      // A bare token with punctuation inside ("e-mail", "don't") is a phrase of its words, as the tokenizer splits it.
      out.push({ words: found, phrase: found.length > 1, negated, or: pendingOr && !negated });
    }
    pendingOr = false;
  }
  return out;
}

/**
 * One term as FTS4 syntax, restricted to the columns asked for. Bare words are lower-cased, so
 * none reads as an operator (FTS's AND, OR, NOT and NEAR are upper case). FTS4 cannot restrict a
 * quoted phrase to a column (`name:"a b"` matches nothing), so a restricted phrase is the phrase
 * anywhere and each of its words in those columns.
 */
function ftsTerm(term: Term, columns: readonly string[]): string {
  const lower = term.words.map((w) => w.toLowerCase());
  const inColumns = (word: string) => {
    if (columns.length === 3) return word;
    const each = columns.map((c) => `${c}:${word}`);
    return each.length === 1 ? each[0]! : `(${each.join(' OR ')})`;
  };
  if (!term.phrase) return inColumns(`${lower[0]}*`);
  const phrase = `"${lower.join(' ')}"`;
  if (columns.length === 3 || term.negated) return phrase;
  return `(${[phrase, ...lower.map(inColumns)].join(' ')})`;
}

export function parseSearchTerm(term: string, keys: readonly SearchKey[] = ALL_KEYS): ParsedQuery {
  const columns = [...new Set(keys.map((k) => SEARCH_KEYS[k]))];
  const terms = lex(term);
  const positive = terms.filter((t) => !t.negated);
  if (positive.length === 0 || columns.length === 0) return { match: undefined, words: [] };
  // OR groups joined by AND, with explicit parentheses so FTS's precedence never matters.
  const groups: string[][] = [];
  for (const t of positive) {
    if (t.or && groups.length > 0) groups.at(-1)!.push(ftsTerm(t, columns));
    else groups.push([ftsTerm(t, columns)]);
  }
  let match = groups.map((g) => (g.length === 1 ? g[0]! : `(${g.join(' OR ')})`)).join(' ');
  for (const t of terms.filter((t) => t.negated)) match += ` NOT ${ftsTerm(t, columns)}`;
  const asked = positive.flatMap((t) => t.words.map((w) => w.toLowerCase()));
  return { match, words: [...new Set(asked)] };
}
