# The extender image: this file is its one definition, and its base is one image wherever it is
# built, so a release tag names one image. It installs the package exactly as the README does (pip
# with constraints.txt) into a virtual environment, on Debian 12 with Debian's own python3.
#   With Docker:     docker build -t placement-extender:0.1.0 .
#   Without Docker:  .venv/bin/python hack/image/build.py [--load]
#     (as root: buildah builds this file; FROM is then a debootstrapped Debian 12 minbase, made
#     here (hack/image/rootfs.py) and stored in buildah's own storage under exactly the name below,
#     since no image registry is reachable there; it writes an OCI archive, and --load imports it
#     into containerd with ctr -n k8s.io images import)
# The build context is what .dockerignore lets in: the files the COPYs below take, nothing else.
#
# Debian 12 by its release name, not a dated snapshot: the release fixes the C library and the
# Python minor (3.11) the wheels in constraints.txt are built for, and the packages below come from
# Debian's archive at build time either way (a dated base would still get today's python3). What
# a given image holds is recorded in its SBOM and THIRD_PARTY_NOTICES (make release).
FROM docker.io/library/debian:12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# python3 with its venv module and CA certificates (pip's HTTPS), from Debian's archive; apt's
# package lists are removed in the same step, so they are in no layer.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin

WORKDIR /app
COPY pyproject.toml README.md constraints.txt LICENSE NOTICE ./
COPY extender ./extender
COPY hack/notices.py ./hack/notices.py
# The build host's pip settings (its index, CA bundle), when it needs its own: a pip.conf the build
# mounts for this step only (hack/image/build.py does); unset, pip uses its defaults.
ARG PIP_CONFIG_FILE
# --no-log-init: no sparse lastlog/faillog entry for uid 65532 (megabytes of zeros in the layer).
RUN python3 -m venv /opt/extender \
    && /opt/extender/bin/pip install -c constraints.txt . \
    && useradd --uid 65532 --no-create-home --no-log-init --shell /usr/sbin/nologin extender
# The licences: the project's, and every third-party package the image holds (its venv's Python
# packages and its Debian packages), listed by the image's own python from what is installed, so
# the file is this image's truth; a dependency under a licence not on hack/notices.py's allow-list
# fails the build here.
RUN mkdir -p /usr/share/doc/placement-extender \
    && cp LICENSE NOTICE /usr/share/doc/placement-extender/ \
    && /opt/extender/bin/python hack/notices.py --root / --out /usr/share/doc/placement-extender/THIRD_PARTY_NOTICES
# The venv's bin first: its `python` is what the ENTRYPOINT runs.
ENV PATH=/opt/extender/bin:$PATH

# The ports the manifests' --listen flags use: 8888 on loopback beside kube-scheduler (deploy/),
# 8443 with TLS on the pod network (overlays tls and in-scheduler); and the probes' health
# listeners (--health-listen): 8889 beside 8888, 8888 beside 8443; and 8080, the metrics port for
# Prometheus (--metrics-listen, every install). tests/unit/test_image_manifests.py
# fails when a manifest listens, declares or probes a port not listed here.
EXPOSE 8888 8889 8443 8080

# Non-root; the manifests also set runAsNonRoot, a read-only root filesystem, and drop all capabilities.
USER 65532:65532
ENTRYPOINT ["python", "-m", "extender"]
CMD ["serve"]
