import { uuidv7 } from "uuidv7";

/** Time-ordered ids (UUIDv7): they sort by creation time, which keeps B-tree inserts local. */
export const newId = (): string => uuidv7();

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (value: string): boolean => UUID.test(value);
