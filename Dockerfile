# Install the dependencies into a virtualenv in one stage; run the source (app/, migrations/) as a
# non-root user in the next. PYTHONPATH points at the source so alembic finds migrations/ beside app/.
FROM python:3.11-slim AS build
WORKDIR /src
RUN python -m venv /venv
COPY pyproject.toml README.md ./
COPY app ./app
RUN /venv/bin/pip install --no-cache-dir .

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 tidings
COPY --from=build /venv /venv
WORKDIR /srv/tidings
COPY alembic.ini ./
COPY migrations ./migrations
COPY openapi ./openapi
COPY app ./app
RUN mkdir -p var && chown -R tidings:tidings /srv/tidings
USER tidings
ENV PATH="/venv/bin:$PATH" \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/srv/tidings \
    TIDINGS_VAR_DIR=/srv/tidings/var
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz').status == 200 else 1)"
CMD ["tidings", "serve", "--host", "0.0.0.0", "--port", "8000"]
