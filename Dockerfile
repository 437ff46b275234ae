# lev in a container: the static `lev` binary in an otherwise empty image,
# running as an unprivileged user, its data in a volume.
#
# From source (needs the Rust image; builds for the platform you build on):
#
#   docker build -t lev .
#
# Around static binaries already built (what scripts/dist.sh and the release
# workflow do; no compiler involved): a context with <arch>/usr/local/bin/lev
# and <arch>/etc/ssl/certs/ca-certificates.crt for each platform, and an empty
# data/ dir:
#
#   docker build --build-arg ROOTFS=rootfs-prebuilt -f Dockerfile CONTEXT
#
# Run it (plain HTTP inside; see the README's "Container" section):
#
#   docker run -d --name lev -p 127.0.0.1:7420:7420 -v lev-data:/data lev
#   docker logs lev            # the admin's dashboard link
#   docker exec lev lev ls     # the CLI, with the admin token of /data

# Which stage supplies the image's files: rootfs-built (compile here) or
# rootfs-prebuilt (copy from the context). Builders skip the stage not used.
ARG ROOTFS=rootfs-built

FROM docker.io/library/rust:1.95-alpine AS build
# musl-dev and gcc: ring's and SQLite's C parts; the Alpine toolchain links
# statically by default.
RUN apk add --no-cache musl-dev gcc ca-certificates
WORKDIR /src
COPY . .
RUN cargo build --locked --profile dist -p lev-cli \
 && mkdir -p /out/image/usr/local/bin /out/image/etc/ssl/certs /out/image/tmp /out/data \
 && cp target/dist/lev /out/image/usr/local/bin/lev \
 && cp /etc/ssl/certs/ca-certificates.crt /out/image/etc/ssl/certs/ \
 && chmod 1777 /out/image/tmp

FROM scratch AS rootfs-built
COPY --from=build /out/ /

FROM scratch AS rootfs-prebuilt
ARG TARGETARCH
COPY ${TARGETARCH}/ /image/
COPY data/ /data/

FROM ${ROOTFS} AS rootfs

FROM scratch
COPY --from=rootfs /image/ /
# An empty dir owned by the user lev runs as: the volume's first contents, so
# a fresh named volume is writable by that user.
COPY --from=rootfs --chown=65532:65532 /data/ /data/
ENV LEV_DATA_DIR=/data
USER 65532:65532
VOLUME ["/data"]
EXPOSE 7420
# `lev health` asks GET /v1/health on LEV_URL (default http://127.0.0.1:7420).
HEALTHCHECK --interval=30s --timeout=10s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/lev", "health"]
ENTRYPOINT ["/usr/local/bin/lev"]
# Plain HTTP on every interface of the container's own network namespace:
# publish the port to loopback (-p 127.0.0.1:7420:7420) or put a TLS proxy in
# front. With your own certificate: serve --listen 0.0.0.0:7420 --tls-cert
# /data/cert.pem --tls-key /data/key.pem, and LEV_URL=https://NAME:7420 for
# the health check.
CMD ["serve", "--listen", "0.0.0.0:7420", "--insecure-http"]
