"""What openmcp's bootstrapper (`manage-deployment-repo`) writes into a
landscape's GitOps repository for one service provider, read with another
OCM implementation than this project's: Gardener's OCM library
(`gardener-ocm`, `gardener-oci`). The tests hand the tree to Flux's
kustomize-controller, which applies it as the bootstrapper's Flux would.

    python bootstrap.py [--plain-http] [--docker-config config.json] --root <registry>[/path]//<name>:<version> \
        --provider kro [--config config.yaml] [--image-pull-secret NAME ...] --out DIR

From the root component it follows the reference `service-provider-<provider>`
(the root's own references first, then one level further down), takes the
first `ociImage` resource as the ServiceProvider's image, downloads the
`<last name segment>-crds` resource and keeps the CRDs labelled
`openmcp.cloud/cluster: platform`, and writes the ServiceProvider with the
bootstrapper config's `config` (a YAML mapping, `--config`) under `spec`,
after `image` and `imagePullSecrets`. The layout is the bootstrapper's:

    DIR/resources/openmcp/crds/<file>.yaml
    DIR/resources/openmcp/service-providers/<provider>.yaml
    DIR/resources/openmcp/kustomization.yaml   (the CRDs first, then the provider)

Prints the image reference. Exits non-zero, naming what failed, when a
reference is missing or ambiguous, a descriptor does not validate against
OCM's schema, or a resource does not match its digest.
"""

import argparse
import hashlib
import io
import os
import sys
import tarfile

import yaml

import ocm
import ocm.retrieve

from check import client_for, component_reference, fail, read_descriptor

CLUSTER_LABEL = "openmcp.cloud/cluster"


def lookup(client, base, name, version):
    """A component version through the library's own lookup, and as stored."""
    found = ocm.retrieve.component_descriptor_from_oci(
        ocm.ComponentIdentity(name, version), [ocm.OciOcmRepository(baseUrl=base)], client)
    reference, descriptor, layers = read_descriptor(client, base, name, version)
    ocm.ComponentDescriptor.from_dict(descriptor, validation_mode=ocm.ValidationMode.FAIL)
    return found, reference, descriptor, layers


def provider_component(client, base, root, provider):
    """The component the root references as `service-provider-<provider>`."""
    wanted = f"service-provider-{provider}"
    found, _, _, _ = lookup(client, base, *root)
    matches = [(r.componentName, r.version) for r in found.component.componentReferences if r.name == wanted]
    if not matches:
        for ref in found.component.componentReferences:
            child, _, _, _ = lookup(client, base, ref.componentName, ref.version)
            matches += [(r.componentName, r.version) for r in child.component.componentReferences if r.name == wanted]
    if len(matches) != 1:
        fail(f"{len(matches)} references named {wanted} below {root[0]}:{root[1]}; exactly one is required")
    return lookup(client, base, *matches[0])


def platform_crds(client, reference, descriptor, layers):
    """The platform CRDs of the `-crds` resource, as (file name, text)."""
    crds_name = descriptor["component"]["name"].rsplit("/", 1)[-1] + "-crds"
    resources = [r for r in descriptor["component"]["resources"] if r["name"] == crds_name]
    if not resources:
        fail(f"{reference}: no resource {crds_name}")
    access = resources[0]["access"]
    if access["type"] not in ("localBlob", "LocalBlob") or access["localReference"] not in layers:
        fail(f"{reference}: {crds_name} is not a local blob of the component")
    data = client.blob(reference, access["localReference"], stream=False).content
    if hashlib.sha256(data).hexdigest() != resources[0]["digest"]["value"]:
        fail(f"{reference}: {crds_name} does not match its digest")
    kept = []
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for member in archive.getmembers():
            if not member.isfile():
                continue
            text = archive.extractfile(member).read().decode()
            labels = (yaml.safe_load(text).get("metadata") or {}).get("labels") or {}
            if labels.get(CLUSTER_LABEL) == "platform":
                kept.append((os.path.basename(member.name), text))
    return kept


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plain-http", action="store_true")
    parser.add_argument("--docker-config", help="a docker config.json with the registry's credentials")
    parser.add_argument("--root", required=True, help="<registry>[/path]//<name>:<version>")
    parser.add_argument("--provider", required=True)
    parser.add_argument("--config", help="the provider's `config` of the bootstrapper config (YAML mapping)")
    parser.add_argument("--image-pull-secret", action="append", default=[])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    client = client_for(args.plain_http, args.docker_config)
    base, name, version = component_reference(args.root)
    found, reference, descriptor, layers = provider_component(client, base, (name, version), args.provider)
    images = [r for r in found.component.resources if str(r.type) in ("ociImage", "ResourceType.OCI_IMAGE")]
    if not images:
        fail(f"{reference}: no ociImage resource")
    image = images[0].access.imageReference

    config = {}
    if args.config:
        with open(args.config) as file:
            config = yaml.safe_load(file) or {}
        if not isinstance(config, dict):
            fail(f"{args.config}: not a mapping")
    spec = {"image": image}
    if args.image_pull_secret:
        spec["imagePullSecrets"] = [{"name": n} for n in args.image_pull_secret]
    spec.update(config)
    provider = {
        "apiVersion": "openmcp.cloud/v1alpha1",
        "kind": "ServiceProvider",
        "metadata": {"name": args.provider},
        "spec": spec,
    }

    root = os.path.join(args.out, "resources", "openmcp")
    os.makedirs(os.path.join(root, "crds"), exist_ok=True)
    os.makedirs(os.path.join(root, "service-providers"), exist_ok=True)
    resources = []
    for file_name, text in platform_crds(client, reference, descriptor, layers):
        with open(os.path.join(root, "crds", file_name), "w") as file:
            file.write(text)
        resources.append(f"crds/{file_name}")
    with open(os.path.join(root, "service-providers", f"{args.provider}.yaml"), "w") as file:
        yaml.safe_dump(provider, file, sort_keys=False)
    resources.append(f"service-providers/{args.provider}.yaml")
    with open(os.path.join(root, "kustomization.yaml"), "w") as file:
        yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                        "resources": resources}, file, sort_keys=False)
    print(image)


if __name__ == "__main__":
    sys.exit(main())
