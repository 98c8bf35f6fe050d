"""Certificates and keys for the sim: one CA, serving certificates for 127.0.0.1, the SA key."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=30)
KEY_BITS = 2048


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)


def _write_key(key: rsa.RSAPrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _builder(subject: str, issuer: x509.Name, public_key: rsa.RSAPublicKey,
             groups: tuple[str, ...] = ()) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]  # the API server reads O as groups
    return (x509.CertificateBuilder()
            .subject_name(x509.Name([*names, x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer).public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALIDITY))


def make_ca(directory: Path, name: str = "gpupoc-sim-ca") -> KeyPair:
    key = _new_key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (_builder(name, subject, key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    pair = KeyPair(directory / f"{name}.crt", directory / f"{name}.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key, pair.key)
    return pair


def _signed(ca: KeyPair, directory: Path, name: str, common_name: str,
            extensions: list[x509.ExtensionType], groups: tuple[str, ...] = ()) -> KeyPair:
    """A key and a certificate for `common_name` with `extensions`, signed by `ca`, written as name.crt/.key."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert.read_bytes())
    ca_key = serialization.load_pem_private_key(ca.key.read_bytes(), password=None)
    assert isinstance(ca_key, rsa.RSAPrivateKey)
    key = _new_key()
    builder = _builder(common_name, ca_cert.subject, key.public_key(), groups)
    for extension in extensions:
        builder = builder.add_extension(extension, critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    pair = KeyPair(directory / f"{name}.crt", directory / f"{name}.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key, pair.key)
    return pair


def make_serving_cert(ca: KeyPair, directory: Path, name: str, dns: tuple[str, ...] = ("localhost",),
                      ips: tuple[str, ...] = ("127.0.0.1",)) -> KeyPair:
    """A server certificate for 127.0.0.1 (or `ips`) and `dns`, signed by `ca`."""
    sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    sans += [x509.DNSName(d) for d in dns]
    return _signed(ca, directory, name, name, [x509.SubjectAlternativeName(sans),
                                               x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH])])


def make_client_cert(ca: KeyPair, directory: Path, name: str, common_name: str,
                     groups: tuple[str, ...] = ()) -> KeyPair:
    """A client certificate (CN `common_name`, O `groups`) signed by `ca`: the API server's front-proxy identity,
    a real node's kubelet (system:node:<name> in system:nodes), the API server's at the kubelets."""
    return _signed(ca, directory, name, common_name, [x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])],
                   groups)


def make_signing_key(path: Path) -> Path:
    """An RSA key the API server signs (and verifies) service-account tokens with."""
    _write_key(_new_key(), path)
    return path
