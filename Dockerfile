# The extender image. It cannot be built in CI here (no Docker engine on these machines), so it
# is kept small and installs the package exactly as the README does: pip with constraints.txt.
#   docker build -t placement-extender:0.1.0 .
FROM python:3.11.14-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md constraints.txt ./
COPY extender ./extender
RUN pip install -c constraints.txt . \
    && useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin extender

# Non-root; the manifests also set runAsNonRoot, a read-only root filesystem, and drop all capabilities.
USER 65532:65532
ENTRYPOINT ["python", "-m", "extender"]
CMD ["serve"]
