import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// Issue 37: components are given what they need when they are made. In the composition root that means no
// setter or property assignment on a component after it is made, and no closure that reaches a component
// declared further down (a forward reference: it works only because nothing calls it before that line runs).
const ROOT = fileURLToPath(new URL('../../src/homeserver.ts', import.meta.url));

function lateWiring(source: string): string[] {
  const file = ts.createSourceFile(ROOT, source, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const root = file.statements.find((s): s is ts.FunctionDeclaration => ts.isFunctionDeclaration(s) && s.name?.text === 'createHomeserver');
  if (!root?.body) throw new Error('createHomeserver not found');
  const declaredAt = new Map<string, number>();
  for (const statement of root.body.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    for (const declaration of statement.declarationList.declarations) {
      if (ts.isIdentifier(declaration.name)) declaredAt.set(declaration.name.text, declaration.getStart());
    }
  }
  const line = (node: ts.Node) => `${file.getLineAndCharacterOfPosition(node.getStart()).line + 1}: ${node.getText().split('\n')[0]}`;
  /** `shadowed`: the parameters of the closures around `node`, which are not the root's components even where named alike. */
  const visit = (node: ts.Node, insideFunction: boolean, shadowed: ReadonlySet<string>): void => {
    // component.part = …
    if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.EqualsToken && ts.isPropertyAccessExpression(node.left)) found.push(`assignment ${line(node)}`);
    // component.setSomething(…)
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && /^set[A-Z]/.test(node.expression.name.text)) found.push(`setter ${line(node)}`);
    // a closure naming a component declared below it
    if (insideFunction && ts.isIdentifier(node) && !(ts.isPropertyAccessExpression(node.parent) && node.parent.name === node)) {
      const at = shadowed.has(node.text) ? undefined : declaredAt.get(node.text);
      if (at !== undefined && at > node.getStart()) found.push(`forward reference to ${node.text} at ${line(node)}`);
    }
    const entersFunction = ts.isArrowFunction(node) || ts.isFunctionExpression(node) || ts.isMethodDeclaration(node);
    const parameters = entersFunction ? node.parameters.flatMap((p) => (ts.isIdentifier(p.name) ? [p.name.text] : [])) : [];
    ts.forEachChild(node, (child) => visit(child, insideFunction || entersFunction, parameters.length ? new Set([...shadowed, ...parameters]) : shadowed));
  };
  ts.forEachChild(root.body, (child) => visit(child, false, new Set()));
  return found;
}

describe('the composition root (src/homeserver.ts)', () => {
  it('wires every component when it is made: no setter, no assignment after, no closure over one made later', () => {
    expect(lateWiring(readFileSync(ROOT, 'utf8'))).toEqual([]);
  });

  it('finds each kind of late wiring', () => {
    const late = `export async function createHomeserver() {
      const queues = new Queues();
      queues.setMailDrop(drop);
      const rooms = new Rooms({ verify: (id) => federation.verify(id), routes: (app) => app.get() });
      sync.backfiller = federation;
      const federation = new Federation();
      const app = createApp();
    }`;
    expect(lateWiring(late)).toEqual([
      'setter 3: queues.setMailDrop(drop)',
      'forward reference to federation at 4: federation',
      'assignment 5: sync.backfiller = federation',
    ]);
  });
});
