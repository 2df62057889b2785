# The extender image: this file is its one definition. It installs the package exactly as the
# README does (pip with constraints.txt), into a virtual environment, so the same steps work on the
# python:slim base and on a plain Debian 12 root filesystem that has only Debian's python3 and
# python3-venv (no `python` command, and a system pip closed by PEP 668).
#   With Docker:     docker build -t placement-extender:0.1.0 .
#   Without Docker:  .venv/bin/python hack/image/build.py --base debian [--load]
#     (as root: buildah builds this file, FROM a debootstrapped Debian 12, and it writes an OCI
#     archive; --load imports it into containerd with ctr -n k8s.io images import)
# The build context is what .dockerignore lets in: the files the COPYs below take, nothing else.
ARG BASE=python:3.11.14-slim-bookworm
FROM ${BASE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md constraints.txt ./
COPY extender ./extender
# The build host's pip settings (its index, CA bundle), when it needs its own: a pip.conf the build
# mounts for this step only (hack/image/build.py does); unset, pip uses its defaults.
ARG PIP_CONFIG_FILE
# --no-log-init: no sparse lastlog/faillog entry for uid 65532 (megabytes of zeros in the layer).
RUN python3 -m venv /opt/extender \
    && /opt/extender/bin/pip install -c constraints.txt . \
    && useradd --uid 65532 --no-create-home --no-log-init --shell /usr/sbin/nologin extender
# The venv's bin first: its `python` is what the ENTRYPOINT runs.
ENV PATH=/opt/extender/bin:$PATH

# The ports the manifests' --listen flags use: 8888 on loopback beside kube-scheduler (deploy/),
# 8443 with TLS on the pod network (overlays tls and in-scheduler); and the probes' health
# listeners (--health-listen): 8889 beside 8888, 8888 beside 8443. tests/unit/test_image_manifests.py
# fails when a manifest listens, declares or probes a port not listed here.
EXPOSE 8888 8889 8443

# Non-root; the manifests also set runAsNonRoot, a read-only root filesystem, and drop all capabilities.
USER 65532:65532
ENTRYPOINT ["python", "-m", "extender"]
CMD ["serve"]
