export * from './format.ts';
export * from './read.ts';
export * from './write.ts';
export * from './sqlite-image.ts';
