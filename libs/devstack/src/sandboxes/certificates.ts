import { generateKeyPairSync, randomBytes } from "node:crypto";
import forge from "node-forge";

export interface SandboxTls {
  /** The CA a sender must trust (PEM). */
  ca: string;
  /** The server's certificate, issued by the CA for localhost and 127.0.0.1 (PEM). */
  cert: string;
  key: string;
}

const rsaKeys = () => {
  // Node's native key generation; forge's pure-JS RSA takes seconds on a busy machine.
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const pem = privateKey.export({ format: "pem", type: "pkcs8" }).toString();
  const key = forge.pki.privateKeyFromPem(pem) as forge.pki.rsa.PrivateKey;
  return { key, publicKey: forge.pki.setRsaPublicKey(key.n, key.e), pem };
};

const serial = () => `01${randomBytes(15).toString("hex")}`;

/** A throwaway CA and a server certificate it issued: push services only speak HTTPS. */
export function createSandboxTls(
  hosts: { dns: string[]; ip: string[] } = { dns: ["localhost"], ip: ["127.0.0.1", "::1"] },
): SandboxTls {
  const notBefore = new Date(Date.now() - 60_000);
  const notAfter = new Date(Date.now() + 365 * 24 * 3600 * 1000);

  const caKeys = rsaKeys();
  const ca = forge.pki.createCertificate();
  ca.publicKey = caKeys.publicKey;
  ca.serialNumber = serial();
  ca.validity.notBefore = notBefore;
  ca.validity.notAfter = notAfter;
  const caName = [{ name: "commonName", value: "notify push sandbox CA" }];
  ca.setSubject(caName);
  ca.setIssuer(caName);
  ca.setExtensions([
    { name: "basicConstraints", cA: true, pathLenConstraint: 0, critical: true },
    { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    { name: "subjectKeyIdentifier" },
  ]);
  ca.sign(caKeys.key, forge.md.sha256.create());

  const serverKeys = rsaKeys();
  const cert = forge.pki.createCertificate();
  cert.publicKey = serverKeys.publicKey;
  cert.serialNumber = serial();
  cert.validity.notBefore = notBefore;
  cert.validity.notAfter = notAfter;
  cert.setSubject([{ name: "commonName", value: hosts.dns[0] ?? "localhost" }]);
  cert.setIssuer(caName);
  cert.setExtensions([
    { name: "basicConstraints", cA: false },
    { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
    { name: "extKeyUsage", serverAuth: true },
    {
      name: "subjectAltName",
      altNames: [...hosts.dns.map((value) => ({ type: 2, value })), ...hosts.ip.map((ip) => ({ type: 7, ip }))],
    },
  ]);
  cert.sign(caKeys.key, forge.md.sha256.create());

  return { ca: forge.pki.certificateToPem(ca), cert: forge.pki.certificateToPem(cert), key: serverKeys.pem };
}
