// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
//
// Validates Kubernetes objects against the Kubernetes API's schema, as the API
// server with kubectl's --validate=strict would: reads a JSON array of
// objects (check_manifest.py turns the YAML into it) on standard input.
//
//   - kubernetes-models: JSON schemas generated from the Kubernetes OpenAPI
//     spec (types, required fields, enums, formats);
//   - @kubernetes/client-node: its models, generated from the same spec
//     (release-1.36), list every field of every type: a field that is not one
//     (a typo: hostPId) is an error, as it is for kubectl --validate=strict.
//
// Prints one line per error and exits 1, or "N objects valid" and exits 0.
// The packages are installed by scripts/install-deps.sh (npm ci here).
// the generated models alone (the package's top level needs a newer Node.js for its HTTP client)
import * as k8s from '@kubernetes/client-node/dist/gen/models/all.js';
import { readFileSync } from 'node:fs';

const errors = [];

function modelClass(type) {
	const c = k8s[type];
	return c && typeof c.getAttributeTypeMap === 'function' ? c : null;
}

function kindOf(v) {
	return Array.isArray(v) ? 'array' : v === null ? 'null' : typeof v;
}

// Every field of value is one its type has, recursively, with a value of its kind.
function strict(value, type, path) {
	let m;

	if (value === null || value === undefined || type === 'any' || type === 'object')
		return;
	if ((m = /^Array<(.+)>$/.exec(type))) {
		if (!Array.isArray(value))
			return errors.push(`${path}: must be a list, not ${kindOf(value)}`);
		value.forEach((v, i) => strict(v, m[1], `${path}[${i}]`));
		return;
	}
	if ((m = /^\{ \[key: string\]: (.+); \}$/.exec(type))) {
		if (kindOf(value) !== 'object')
			return errors.push(`${path}: must be a map, not ${kindOf(value)}`);
		for (const [k, v] of Object.entries(value))
			strict(v, m[1], `${path}.${k}`);
		return;
	}
	switch (type) {
	case 'string':
	case 'Date':
		if (typeof value !== 'string')
			errors.push(`${path}: must be a string, not ${kindOf(value)}`);
		return;
	case 'boolean':
		if (typeof value !== 'boolean')
			errors.push(`${path}: must be true or false, not ${kindOf(value)}`);
		return;
	case 'number':
	case 'integer':
		if (typeof value !== 'number')
			errors.push(`${path}: must be a number, not ${kindOf(value)}`);
		return;
	case 'IntOrString':
		if (typeof value !== 'number' && typeof value !== 'string')
			errors.push(`${path}: must be a number or a string, not ${kindOf(value)}`);
		return;
	}
	const c = modelClass(type);
	if (!c)
		return errors.push(`${path}: the schema has no type ${type}`);
	if (kindOf(value) !== 'object')
		return errors.push(`${path}: must be an object (${type}), not ${kindOf(value)}`);
	const fields = new Map(c.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
	for (const [k, v] of Object.entries(value)) {
		if (!fields.has(k))
			errors.push(`${path}.${k}: unknown field of ${type}`);
		else
			strict(v, fields.get(k), `${path}.${k}`);
	}
}

async function validate(obj, i) {
	const where = `object ${i + 1} (${obj && obj.kind}${obj && obj.metadata ? ' ' + obj.metadata.name : ''})`;

	if (kindOf(obj) !== 'object' || typeof obj.apiVersion !== 'string' || typeof obj.kind !== 'string')
		return errors.push(`${where}: not a Kubernetes object (apiVersion and kind)`);
	// kubernetes-models: one module per apiVersion and kind
	let Model;
	try {
		Model = (await import(`kubernetes-models/${obj.apiVersion}/${obj.kind}`))[obj.kind];
	} catch (e) {
		return errors.push(`${where}: unknown apiVersion/kind ${obj.apiVersion}/${obj.kind}`);
	}
	try {
		new Model(obj).validate();
	} catch (e) {
		for (const line of String(e.message).split('\n'))
			errors.push(`${where}: ${line}`);
	}
	// client-node: V1DaemonSet for apps/v1 DaemonSet, V1Namespace for v1 Namespace
	const version = obj.apiVersion.split('/').pop();
	strict(obj, version[0].toUpperCase() + version.slice(1) + obj.kind, where);
}

const objects = JSON.parse(readFileSync(0, 'utf8'));
if (!Array.isArray(objects) || !objects.length) {
	console.log('no objects to validate');
	process.exit(1);
}
for (let i = 0; i < objects.length; i++)
	await validate(objects[i], i);
for (const e of errors)
	console.log(e);
if (!errors.length)
	console.log(`${objects.length} objects valid`);
process.exit(errors.length ? 1 : 0);
