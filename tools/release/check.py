"""Reads published OCM component versions back with another implementation
than the one that wrote them: Gardener's OCM library (`gardener-ocm` and
`gardener-oci` from PyPI) for the registry, the OCM data model and its JSON
schema; the normalisation, the signature check (`cryptography`) and the
digests written here from the OCM specification, independently of
tools/release.

    python check.py --key ocm.pub [--plain-http] <registry>[/path]//<name>:<version> ...

Exits non-zero, naming what failed, when a descriptor does not validate
against OCM's schema, its signature does not verify, a resource does not
match its digest, or a provider component lacks what openmcp's bootstrapper
needs (a first `ociImage`, `<name>-crds` with platform-labelled CRDs).
"""

import argparse
import hashlib
import io
import json
import sys
import tarfile

import yaml
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import padding, rsa, utils

import oci.auth
import oci.client
import ocm
import ocm.retrieve

CONFIG = "application/vnd.ocm.software.component.config.v1+json"


def fail(message):
    print(f"check: {message}", file=sys.stderr)
    sys.exit(1)


def client_for(plain_http, docker_config=None):
    """A registry client; with credentials from a docker `config.json` if named."""
    credentials = {}
    if docker_config:
        credentials["credentials_lookup"] = oci.auth.docker_credentials_lookup(docker_cfg=docker_config)
    if plain_http:
        # The library builds https:// URLs (also in its token exchange); a
        # local test registry speaks plain HTTP.
        def base(image_reference):
            host = str(image_reference).split("/", 1)[0]
            return f"http://{host}/v2/"

        oci.client.base_api_url = base
        return oci.client.Client(routes=oci.client.OciRoutes(base), max_retries=1, **credentials)
    return oci.client.Client(max_retries=2, **credentials)


def component_reference(text):
    base, rest = text.split("//", 1)
    name, version = rest.rsplit(":", 1)
    return base.rstrip("/"), name, version


def read_descriptor(client, base, name, version):
    """The descriptor as stored (a dict) and the manifest's layer digests."""
    reference = f"{base}/component-descriptors/{name}:{version.replace('+', '.build-')}"
    manifest = json.loads(client.manifest_raw(reference).content)
    if manifest["config"]["mediaType"] != CONFIG:
        fail(f"{reference}: config media type {manifest['config']['mediaType']}")
    config = json.loads(client.blob(reference, manifest["config"]["digest"], stream=False).content)
    layer = config["componentDescriptorLayer"]
    data = client.blob(reference, layer["digest"], stream=False).content
    if hashlib.sha256(data).hexdigest() != layer["digest"].split(":", 1)[1]:
        fail(f"{reference}: the descriptor layer does not match its digest")
    if layer["mediaType"].endswith("+tar"):
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            data = archive.extractfile("component-descriptor.yaml").read()
    descriptor = yaml.safe_load(data)
    layers = {entry["digest"] for entry in manifest["layers"]}
    return reference, descriptor, layers


def signed_labels(labels):
    kept = [
        {k: v for k, v in label.items() if k in ("name", "version", "value", "signing")}
        for label in labels or []
        if label.get("signing") in (True, "true")
    ]
    return kept or None


def normalise(descriptor):
    """jsonNormalisation/v4alpha1: the signed fields as canonical JSON.

    Sorted keys and no whitespace, which is RFC 8785 for what these
    descriptors hold (ASCII text and integers; no floating-point numbers).
    """
    component = dict(descriptor["component"])
    component.pop("repositoryContexts", None)
    component["provider"] = {"name": component["provider"]}
    for key, dropped in (("resources", ("access", "srcRefs")), ("sources", ("access",))):
        entries = []
        for entry in component.get(key) or []:
            entry = dict(entry)
            if (entry.get("access") or {}).get("type", "").lower() == "none":
                entry.pop("digest", None)
            for name in dropped:
                entry.pop(name, None)
            if not entry.get("extraIdentity"):
                entry.pop("extraIdentity", None)
            labels = signed_labels(entry.pop("labels", None))
            if labels:
                entry["labels"] = labels
            entries.append(entry)
        component[key] = entries
    component["componentReferences"] = component.get("componentReferences") or []
    labels = signed_labels(component.pop("labels", None))
    if labels:
        component["labels"] = labels
    return json.dumps({"component": component}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def verify_signature(descriptor, key, name):
    signatures = [s for s in descriptor.get("signatures") or [] if s["name"] == name]
    if not signatures:
        fail(f"no signature {name}")
    signature = signatures[0]
    digest = hashlib.sha256(normalise(descriptor).encode()).hexdigest()
    if signature["digest"]["value"] != digest:
        fail(f"signature {name} covers {signature['digest']['value']}, the descriptor normalises to {digest}")
    if signature["signature"]["algorithm"] != "RSASSA-PKCS1-V1_5":
        fail(f"signature algorithm {signature['signature']['algorithm']}")
    if not isinstance(key, rsa.RSAPublicKey):
        fail("the key is not an RSA public key")
    try:
        key.verify(
            bytes.fromhex(signature["signature"]["value"]),
            bytes.fromhex(digest),
            padding.PKCS1v15(),
            utils.Prehashed(hashes.SHA256()),
        )
    except InvalidSignature:
        fail(f"signature {name} does not verify with this key")


def check_resources(client, reference, descriptor, layers):
    for resource in descriptor["component"]["resources"]:
        access, recorded = resource["access"], resource["digest"]["value"]
        if access["type"] in ("ociArtifact", "OCIImage", "ociRegistry", "ociImage"):
            head = client.head_manifest(access["imageReference"], accept=",".join([
                "application/vnd.oci.image.index.v1+json", "application/vnd.oci.image.manifest.v1+json",
                "application/vnd.docker.distribution.manifest.list.v2+json",
                "application/vnd.docker.distribution.manifest.v2+json"]))
            if head.digest != f"sha256:{recorded}":
                fail(f"{resource['name']}: {access['imageReference']} is {head.digest}")
        elif access["type"] in ("localBlob", "LocalBlob"):
            if access["localReference"] not in layers:
                fail(f"{resource['name']}: local blob {access['localReference']} is not a layer of {reference}")
            data = client.blob(reference, access["localReference"], stream=False).content
            if hashlib.sha256(data).hexdigest() != recorded:
                fail(f"{resource['name']}: local blob does not match its digest")
            resource["_bytes"] = data
        else:
            fail(f"{resource['name']}: access type {access['type']}")


def check_provider(descriptor):
    """What openmcp's bootstrapper takes from a provider's component."""
    resources = descriptor["component"]["resources"]
    images = [r for r in resources if r["type"] == "ociImage"]
    if not images or "@sha256:" not in images[0]["access"].get("imageReference", ""):
        fail("the first ociImage resource is missing or not pinned by digest")
    crds_name = descriptor["component"]["name"].rsplit("/", 1)[1] + "-crds"
    crds = [r for r in resources if r["name"] == crds_name]
    if not crds:
        fail(f"no resource {crds_name}")
    platform = 0
    with tarfile.open(fileobj=io.BytesIO(crds[0]["_bytes"])) as archive:
        for member in archive.getmembers():
            crd = yaml.safe_load(archive.extractfile(member).read())
            if crd["kind"] != "CustomResourceDefinition":
                fail(f"{member.name} is a {crd['kind']}")
            cluster = crd["metadata"].get("labels", {}).get("openmcp.cloud/cluster")
            if cluster not in ("platform", "onboarding"):
                fail(f"{member.name} has no openmcp.cloud/cluster label")
            platform += cluster == "platform"
    return images[0]["access"]["imageReference"], platform


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--key", required=True, help="the RSA public key (PEM) that signed the components")
    parser.add_argument("--signature", default="service-provider-host")
    parser.add_argument("--plain-http", action="store_true")
    parser.add_argument("components", nargs="+")
    args = parser.parse_args()
    with open(args.key, "rb") as file:
        key = serialization.load_pem_public_key(file.read())
    client = client_for(args.plain_http)
    for text in args.components:
        base, name, version = component_reference(text)
        reference, descriptor, layers = read_descriptor(client, base, name, version)
        # OCM's data model and schema (raises on a descriptor that does not
        # validate), and the library's own lookup of the component version.
        ocm.ComponentDescriptor.from_dict(descriptor, validation_mode=ocm.ValidationMode.FAIL)
        found = ocm.retrieve.component_descriptor_from_oci(
            ocm.ComponentIdentity(name, version), [ocm.OciOcmRepository(baseUrl=base)], client)
        if (found.component.name, found.component.version) != (name, version):
            fail(f"{reference} holds {found.component.name}:{found.component.version}")
        if [r.name for r in found.component.resources] != [r["name"] for r in descriptor["component"]["resources"]]:
            fail(f"{reference}: the library reads other resources")
        verify_signature(descriptor, key, args.signature)
        check_resources(client, reference, descriptor, layers)
        image, platform = check_provider(descriptor)
        print(f"{text}: schema, signature, {len(descriptor['component']['resources'])} resource digests; "
              f"image {image}; {platform} platform CRD(s)")


if __name__ == "__main__":
    main()
