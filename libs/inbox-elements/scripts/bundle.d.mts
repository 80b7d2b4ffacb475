export declare const ENTRY: string;
export declare const OUTFILE: string;
export declare const BUDGET_GZIP_BYTES: number;
export declare function bundle(options?: { write?: boolean }): Promise<{
  bytes: number;
  gzipBytes: number;
  contents: Uint8Array;
}>;
