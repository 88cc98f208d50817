// Vite's client types (`?url` imports, import.meta.env) for the browser host.
/// <reference types="vite/client" />
