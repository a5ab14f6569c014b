import { type MemoryState, MemoryStorage } from "../../src/index.js";
import { queueStorageContract } from "./storageContract.js";

queueStorageContract("MemoryStorage", {
  fresh() {
    const state: MemoryState = { segments: new Map(), counters: {} };
    return {
      open: () => new MemoryStorage(state),
      tearLast(text) {
        const last = Math.max(...state.segments.keys());
        state.segments.set(last, state.segments.get(last) + text);
      },
    };
  },
});
