/** The SDK with Node's file-backed queue storage. */

export * from "../index.js";
export { FileStorage } from "./fileStorage.js";
