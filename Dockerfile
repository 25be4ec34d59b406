# Build and install the package (migrations and OpenAPI documents ship inside it) into a virtualenv in
# one stage; run it as a non-root user in the next, which needs nothing of the source tree.
FROM python:3.11.10-slim AS build
WORKDIR /src
RUN python -m venv /venv
COPY pyproject.toml setup.py README.md ./
COPY app ./app
COPY migrations ./migrations
COPY openapi ./openapi
RUN /venv/bin/pip install --no-cache-dir .

FROM python:3.11.10-slim
RUN useradd --create-home --uid 10001 tidings
COPY --from=build /venv /venv
WORKDIR /srv/tidings
RUN mkdir -p var && chown -R tidings:tidings /srv/tidings
USER tidings
ENV PATH="/venv/bin:$PATH" \
    PYTHONUNBUFFERED=1 \
    TIDINGS_VAR_DIR=/srv/tidings/var
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz').status == 200 else 1)"
CMD ["tidings", "serve", "--host", "0.0.0.0", "--port", "8000"]
