import type { IForbiddenRuleType } from 'dependency-cruiser';

/** One layer of Hearth's dependency order (scripts/layers.mjs). */
export interface Layer {
  name: string;
  /** Folders (or single files) of the layer, relative to the repository root. */
  folders: string[];
  /** What the layer owns, in a few words. */
  owns: string;
  /** Outside the down-only chain: imports nothing of the project outside itself. */
  isolated?: boolean;
  /** For an isolated layer: the only folders that may import it. */
  hostedBy?: string[];
}

/** A narrowed downward import: `from` may import only `only` (paths relative to `to`) of `to`. */
export interface Surface {
  from: string;
  to: string;
  only: string[];
  why: string;
}

/** Packages only one platform has, and the modules (a host's, or an adapter) that alone may import them. */
export interface PlatformBound {
  platform: string;
  /** Also the platform's built-in modules (`node:…`). */
  core?: boolean;
  packages: string[];
  implementedIn: string[];
  why: string;
}

export const layers: Layer[];
export const platformBound: PlatformBound[];
export const surfaces: Surface[];
export function pathPattern(folder: string): string;
export function anyOf(folders: string[]): string;
export function layerRules(): IForbiddenRuleType[];
