import { randomFillSync } from "node:crypto";
import { V7Generator } from "uuidv7";

/**
 * The generator's random words come from a pool filled 1,024 words at a time: the library's
 * default buffer holds eight, with which every other id would pay a call into the system's RNG.
 */
class PooledRandom {
  readonly #pool = new Uint32Array(1024);
  #cursor = this.#pool.length;
  nextUint32(): number {
    if (this.#cursor >= this.#pool.length) {
      randomFillSync(this.#pool);
      this.#cursor = 0;
    }
    return this.#pool[this.#cursor++] as number;
  }
}

const generator = new V7Generator(new PooledRandom());

/**
 * Time-ordered ids (UUIDv7): they sort by creation time, which keeps B-tree inserts local;
 * within a process they are strictly increasing (the generator's counter).
 */
export const newId = (): string => generator.generate().toString();

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (value: string): boolean => UUID.test(value);
